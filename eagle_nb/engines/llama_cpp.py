"""llama.cpp's `llama-server` with an EAGLE-3 drafter (`--spec-type draft-eagle3`), as a child
process group the kit owns (`LlamaServer`, the lifecycle of `server.Server`), fed GGUF files
the kit writes from HF checkpoints (`checkpoints/gguf_write.py`), and asked for greedy
completions of token-id prompts one request at a time.

Facts this relies on (llama.cpp vendored by llama-cpp-python 0.3.36, `tools/server`):
- flags: `-m TARGET.gguf -md DRAFT.gguf --spec-type draft-eagle3 --spec-draft-n-max K`
  (`--draft-max` was removed: `common/arg.cpp`), `--spec-draft-p-min 0` (default 0: always draft
  K tokens), `--metrics`; the draft depth cannot be changed per request (server-schema.cpp: the
  `speculative.*` request fields are compiled out).
- `/completion` with a list of token ids as `prompt`, `return_tokens: true` returns the ids;
  `timings.draft_n` / `draft_n_accepted` (server-common.cpp) give a request's drafted and accepted
  tokens but not its verify steps; `/metrics` has the counters `llamacpp:spec_decode_num_drafts_total`
  (verify steps), `..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
  `..._num_accepted_tokens_per_pos_total{position}`, updated when a request's slot is released
  (`metrics_on_prediction`), i.e. just after its answer is sent.
- log lines (`tools/server/server-context.cpp`): at the end of every request (`print_timings`)
  "draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f" with mean len =
  1 + accepted / verify steps of that request; per verify step, only with LLAMA_TRACE set,
  "accepted %2zu/%2zu draft tokens" (a chain's accepted-count histogram, hence tau and
  per-position acceptance exactly); with `-lv 4` or more "acc per pos = (a, b, ...)" per request.
- drafts are the draft model's top-1 (top-k 10 sampler, first candidate); verification is
  `common_sampler_sample_and_accept_n`: a draft token is accepted while it equals the target's
  sampled token, so at T > 0 this is not rejection sampling: compare greedy only.
Knows processes, flags, log lines and HTTP; model code stays in the kit.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from pathlib import Path

from eagle_nb.engines.entry import Engine, mean_se
from eagle_nb.engines.server import DEFAULT_ENGINE_VENV, EngineError, Server, http_post_json

NAME = "llama.cpp"

LLAMA_CPP_PYTHON = "0.3.36"          # the PyPI sdist whose vendored llama.cpp `make engine` builds
BUILD_DIR_NAME = f"llama.cpp-{LLAMA_CPP_PYTHON}"
FAILED_NOTE = "BUILD_FAILED"         # written by scripts/build_llama_server.sh with the reason


def engine_dir() -> Path:
    return Path(os.environ.get("ENGINE_VENV") or DEFAULT_ENGINE_VENV) / BUILD_DIR_NAME


def llama_server_binary(path=None) -> Path:
    """`path`, else $EAGLE_NB_LLAMA_SERVER, else <engine env>/llama.cpp-<version>/bin/llama-server
    (built by `make engine`). Raises EngineError saying why it is absent."""
    cand = Path(path or os.environ.get("EAGLE_NB_LLAMA_SERVER") or engine_dir() / "bin" / "llama-server")
    if cand.is_file() and os.access(cand, os.X_OK):
        return cand
    note = engine_dir() / FAILED_NOTE
    why = f"; the last build failed: {note.read_text(errors='replace').strip()[:400]}" if note.is_file() else ""
    raise EngineError(f"no llama-server: {cand} is not an executable file{why}. Run `make engine` "
                      f"(builds it from llama-cpp-python=={LLAMA_CPP_PYTHON}'s vendored llama.cpp) "
                      "or set EAGLE_NB_LLAMA_SERVER to a llama-server with draft-eagle3")


def llama_unavailable_reason(path=None) -> str | None:
    """None when a llama-server binary is there, else why not (for skips)."""
    try:
        llama_server_binary(path)
    except EngineError as e:
        return str(e)
    return None


THREADS_ENV = "EAGLE_NB_ENGINE_THREADS"


def default_threads() -> int:
    """llama-server's threads: $EAGLE_NB_ENGINE_THREADS when set (`eagle-nb report` sets 1 when it
    runs notebooks side by side: llama.cpp's threads spin while they wait, and two of them sharing
    a core with another kernel ran notebook 05's llama.cpp part in 66 s instead of 2.5 s), else 2."""
    n = os.environ.get(THREADS_ENV, "")
    return int(n) if n.isdigit() and int(n) > 0 else 2


def llama_command(binary, target_gguf, drafter_gguf, depth: int, port="{port}", *, threads: int | None = None,
                  ctx: int = 2048, extra_args=()) -> list[str]:
    """One slot (requests run one at a time), greedy-friendly drafting (p-min 0), counters on.
    `drafter_gguf` None: the target alone (no draft model, no speculation)."""
    threads = default_threads() if threads is None else threads
    draft = [] if drafter_gguf is None else [
        "-md", str(drafter_gguf), "--spec-type", "draft-eagle3", "--spec-draft-n-max", str(int(depth)),
        "--spec-draft-n-min", "0", "--spec-draft-p-min", "0"]
    return [str(binary), "-m", str(target_gguf), *draft,
            "--host", "127.0.0.1", "--port", str(port), "-np", "1", "-c", str(ctx), "-t", str(threads),
            "--metrics", "--no-webui", "--no-warmup", *extra_args]


def gguf_cache_dir() -> Path:
    d = Path(os.environ.get("EAGLE_NB_GGUF_CACHE") or Path(tempfile.gettempdir()) / "eagle_nb_gguf")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _stamp(path) -> str:
    p = Path(path).resolve()
    files = sorted(p.iterdir()) if p.is_dir() else [p]
    return ";".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files if f.is_file())


def as_gguf(path, role: str, target=None, fault: str | None = None) -> Path:
    """`path` itself when it is a GGUF file, else a GGUF written from the HF directory into the
    cache (keyed by the source files' names, sizes and times, the target and the fault) by the
    format registry's GGUF entry (a target directory as a target, a drafter as a drafter)."""
    from eagle_nb.checkpoints.registry import entry
    gguf = entry("gguf")
    if gguf.detect(path):
        if fault:
            raise ValueError(f"{path} is already a GGUF file; a fault is planted when converting")
        return Path(path)
    key = hashlib.sha1(f"{role}|{Path(path).resolve()}|{_stamp(path)}|{target and _stamp(target)}|{fault}"
                       .encode()).hexdigest()[:16]
    out = gguf_cache_dir() / f"{role}-{key}.gguf"
    if not out.is_file():
        gguf.write(path, out, target=target, fault=fault, force=True)
    return out


class LlamaServer(Server):
    """One llama-server process group for a target and an EAGLE-3 drafter (HF directories, converted
    and cached, or GGUF files); `drafter` None serves the target alone. `target_gguf`: the file
    llama-server runs as the target (e.g. a quantized GGUF) while `target`, an HF directory, lends
    the drafter's conversion its tokenizer and depth. Same lifecycle as every server: context
    manager, stop(), atexit."""

    engine = NAME
    log_prefix = "eagle_nb_llama_"

    def __init__(self, target, drafter, depth: int = 4, *, binary=None, fault: str | None = None,
                 threads: int | None = None, ctx: int = 2048, extra_args=(), startup_timeout: float = 300.0,
                 dtype: str | None = None, target_gguf=None, **kw):
        # an HF target is written float32 (checkpoints/gguf_write.py); a GGUF file is served as it is
        self.target_gguf = as_gguf(target_gguf or target, "target")
        self.drafter_gguf = None if drafter is None else as_gguf(drafter, "drafter", target=target, fault=fault)
        if Path(self.target_gguf).resolve() == Path(target_gguf or target).resolve():
            # NOTE: a GGUF served as given may be quantized; on an AMX CPU the repacked Q4_1 matmul
            # (ggml_backend_amx_mul_mat) segfaults in the first decode (llama.cpp of 0.3.36)
            # without repacking, 2 threads never answered a 64-token request in 60 s; 1 took 1.1 s
            extra_args, threads = ("--no-repack", *extra_args), 1 if threads is None else threads
        cmd = llama_command(llama_server_binary(binary), self.target_gguf, self.drafter_gguf, depth,
                            threads=threads, ctx=ctx, extra_args=extra_args)
        # LLAMA_TRACE: one "accepted k/n draft tokens" line per verify step in the log
        env = {"LLAMA_TRACE": "1", **dict(kw.pop("env", None) or {})}
        super().__init__(target, drafter, depth, command=cmd, env=env,
                         startup_timeout=min(startup_timeout, 300.0), **kw)
        self.dtype = dtype or ENTRY.dtype


def complete(url: str, prompts: list[list[int]], max_tokens: int, temperature: float = 0.0,
             seed: int | None = None, ignore_eos: bool = True) -> tuple[list[list[int]], list[dict]]:
    """One `/completion` request per prompt, in order (one slot: the server's counters then add
    up per request). Returns (generated ids per prompt, the `timings` of each answer). At T > 0
    the sampler is plain temperature sampling (top-k/top-p/min-p off)."""
    out, timings = [], []
    for ids in prompts:
        body = {"prompt": [int(t) for t in ids], "n_predict": int(max_tokens), "temperature": float(temperature),
                "ignore_eos": bool(ignore_eos), "cache_prompt": False, "return_tokens": True,
                "stream": False, "top_k": 0, "top_p": 1.0, "min_p": 0.0}
        if seed is not None:
            body["seed"] = int(seed)
        r = http_post_json(url.rstrip("/") + "/completion", body)
        if not isinstance(r.get("tokens"), list):
            raise EngineError(f"{url}/completion returned no token ids (keys {sorted(r)[:12]}): is it llama-server?")
        out.append([int(t) for t in r["tokens"]])
        timings.append(r.get("timings") or {})
    return out, timings


def settle(scrape, before, outputs, timeout: float = 10.0):
    """The counters after the last answer, once the server has booked every generated token (it
    updates them when the slot is released, just after sending the answer)."""
    generated = sum(len(o) for o in outputs)
    deadline = time.monotonic() + timeout
    while True:
        after = scrape()
        if (after - before).generation_tokens >= generated or time.monotonic() > deadline:
            return after
        time.sleep(0.1)


# -- its log ---------------------------------------------------------------------------------------
LLAMA_MARK = "draft acceptance ="
REQUEST = re.compile(r"draft acceptance = (\d+(?:\.\d+)?) \(\s*(\d+) accepted /\s*(\d+) generated\), "
                     r"mean len =\s*(\d+(?:\.\d+)?)")
STEP = re.compile(r"accepted\s+(\d+)/\s*(\d+) draft tokens")
PER_POS = re.compile(r"acc per pos = \(([\d.,\s]*)\)")


def parse_line(line: str) -> dict | None:
    """One end-of-request line -> the kit's log columns; None when it is cut short."""
    m = REQUEST.search(line)
    if not m:
        return None
    ratio, acc, gen, mean = m.groups()
    return {"accept_length": float(mean), "draft_acceptance_rate": float(ratio),
            "accepted_tokens": float(acc), "drafted_tokens": float(gen), "per_position": None}


def step_counts(text: str) -> list[tuple[int, int]]:
    """(accepted, drafted) per verify step, in log order (LLAMA_TRACE lines)."""
    return [(int(a), int(d)) for a, d in STEP.findall(text)]


def summarise(rows, text: str, num_draft_tokens=None) -> tuple[dict | None, dict]:
    """Pooled numbers: from the per-request lines (drafted/accepted; tau when the step lines give
    the verify steps) and from the per-step lines (the exact accepted-count histogram)."""
    steps = step_counts(text)
    if not len(rows) and not steps:
        return None, {}
    out = {"requests": len(rows)}
    if len(rows):
        out.update(accepted_tokens=int(rows.accepted_tokens.sum()), drafted_tokens=int(rows.drafted_tokens.sum()))
        if out["drafted_tokens"]:
            out["draft_acceptance_rate"] = out["accepted_tokens"] / out["drafted_tokens"]
        # mean len = 1 + accepted / steps per request, so steps = accepted / (mean len - 1)
        per_request = [a / (m - 1) for a, m in zip(rows.accepted_tokens, rows.accept_length) if m > 1]
        out["mean_accept_length_of_requests"] = float(rows.accept_length.mean())
        if len(per_request) == len(rows):
            out["verify_steps_from_mean_len"] = round(sum(per_request))
    if steps:
        k = max(d for _, d in steps)
        counts = [0] * (k + 1)
        for a, _ in steps:
            counts[min(a, k)] += 1
        n = len(steps)
        out.update(verify_steps=n, depth=k, accept_counts=counts,
                   accept_length=1 + sum(a for a, _ in steps) / n,
                   per_position_acceptance=[sum(counts[i + 1:]) / n for i in range(k)],
                   short_drafts=sum(d < k for _, d in steps))
    pp = [[float(x) for x in m.split(",") if x.strip()] for m in PER_POS.findall(text)]
    if pp:
        out["per_position_lines"] = pp
    return out, {}


def observe(rows, summary: dict, text: str) -> dict:
    """From the per-step lines when the log has them (exact tau, depth and per-position rates),
    else from the per-request lines: tau = 1 + accepted / verify steps (steps from each request's
    mean len), no depth (a request line does not state it)."""
    if "verify_steps" in summary:
        return {"tau": summary["accept_length"], "depth": summary["depth"],
                "per_position": summary["per_position_acceptance"], "lines": summary["verify_steps"]}
    tau, se = mean_se(rows.accept_length)
    steps = summary.get("verify_steps_from_mean_len")
    if steps:
        tau = 1 + summary["accepted_tokens"] / steps
    return {"tau": tau, "tau_se": se, "depth": None,
            "depth_note": "llama-server's request lines do not state the draft depth: give --depth "
                          "(or serve with LLAMA_TRACE=1 for per-step lines)"}


def run_complete(url: str, ids, max_new_tokens: int, temperature: float, seed):
    """Stop at EOS as the reference loop does: llama.cpp's ignore_eos bans EOS (a -inf logit bias),
    which changes the greedy token where the target wants to stop."""
    return complete(url, ids, max_new_tokens, temperature, seed=seed if temperature else None,
                    ignore_eos=False)


def write_broken(src, dst, fault: str, target=None) -> Path:
    """A GGUF drafter with `fault` planted (checkpoints/gguf_write.py: layer ids shifted, d2t offsets as ids)."""
    from eagle_nb.checkpoints.registry import entry
    return entry("gguf").write(src, dst, target=target, fault=fault, force=True)[0]


def broken_faults() -> tuple[str, ...]:
    from eagle_nb.checkpoints.broken import GGUF_FAULTS
    return GGUF_FAULTS


def profile_from(text: str, conditions: dict | None = None):
    """A profile from a llama-server log's LLAMA_TRACE step lines (profiles/profile_engines.py)."""
    from eagle_nb.profiles.profile_engines import profile_from_llama_steps
    return profile_from_llama_steps(step_counts(text), conditions=conditions)


ENTRY = Engine(
    NAME, "llama.cpp", log_mark=LLAMA_MARK, parse_line=parse_line,
    time_pattern=(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", "%Y-%m-%d %H:%M:%S"),   # [2025-11-13 10:00:00
    summarise=summarise, observe=observe,
    counter_prefix="llamacpp:spec_decode_", generated_counter="llamacpp:tokens_predicted_total",
    server=LlamaServer, unavailable=llama_unavailable_reason, complete=run_complete, settle=settle,
    dtype="float32", shipped_drafter="drafter",
    sampling_note="llama.cpp accepts a draft token while it equals the target's sampled token "
                  "(common_sampler_sample_and_accept_n), not by rejection sampling: at T > 0 its "
                  "acceptance is not the reference loop's quantity",
    write_broken=write_broken, broken_faults=broken_faults, profile_from=profile_from)
