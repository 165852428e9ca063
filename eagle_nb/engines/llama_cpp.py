"""llama.cpp's `llama-server` with an EAGLE-3 drafter (`--spec-type draft-eagle3`), as a child
process group the kit owns (`LlamaServer`, the lifecycle of `server.VllmServer`), fed GGUF files
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
- drafts are the draft model's top-1 (top-k 10 sampler, first candidate); verification is
  `common_sampler_sample_and_accept_n`: a draft token is accepted while it equals the target's
  sampled token, so at T > 0 this is not rejection sampling: compare greedy only.
Knows processes, flags and HTTP; model code stays in the kit.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

from eagle_nb.engines.server import (
    DEFAULT_ENGINE_VENV,
    EngineError,
    VllmServer,
    http_post_json,
)

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
    """One slot (requests run one at a time), greedy-friendly drafting (p-min 0), counters on."""
    threads = default_threads() if threads is None else threads
    return [str(binary), "-m", str(target_gguf), "-md", str(drafter_gguf), "--spec-type", "draft-eagle3",
            "--spec-draft-n-max", str(int(depth)), "--spec-draft-n-min", "0", "--spec-draft-p-min", "0",
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
    cache (keyed by the source files' names, sizes and times, the target and the fault)."""
    from eagle_nb.checkpoints.gguf_read import is_gguf
    from eagle_nb.checkpoints.gguf_write import write_drafter_gguf, write_target_gguf
    if is_gguf(path):
        if fault:
            raise ValueError(f"{path} is already a GGUF file; a fault is planted when converting")
        return Path(path)
    key = hashlib.sha1(f"{role}|{Path(path).resolve()}|{_stamp(path)}|{target and _stamp(target)}|{fault}"
                       .encode()).hexdigest()[:16]
    out = gguf_cache_dir() / f"{role}-{key}.gguf"
    if not out.is_file():
        if role == "target":
            write_target_gguf(path, out, force=True)
        else:
            write_drafter_gguf(path, out, target, fault=fault, force=True)
    return out


class LlamaServer(VllmServer):
    """One llama-server process group for a target and an EAGLE-3 drafter (HF directories, converted
    and cached, or GGUF files). Same lifecycle as VllmServer: context manager, stop(), atexit."""

    def __init__(self, target, drafter, depth: int = 4, *, binary=None, fault: str | None = None,
                 threads: int | None = None, ctx: int = 2048, extra_args=(), startup_timeout: float = 300.0,
                 **kw):
        self.target_gguf = as_gguf(target, "target")
        self.drafter_gguf = as_gguf(drafter, "drafter", target=target, fault=fault)
        cmd = llama_command(llama_server_binary(binary), self.target_gguf, self.drafter_gguf, depth,
                            threads=threads, ctx=ctx, extra_args=extra_args)
        # LLAMA_TRACE: one "accepted k/n draft tokens" line per verify step in the log
        env = {"LLAMA_TRACE": "1", **dict(kw.pop("env", None) or {})}
        super().__init__(target, drafter, depth, command=cmd, env=env, startup_timeout=startup_timeout, **kw)
        self.engine = "llama.cpp"
        old, self.log_path = self.log_path, Path(tempfile.mkstemp(prefix="eagle_nb_llama_", suffix=".log",
                                                                   dir=kw.get("log_dir"))[1])
        old.unlink(missing_ok=True)


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


def settled_scrape(endpoint, before, generated: int, timeout: float = 10.0):
    """The counters after the last answer, once the server has booked every generated token (it
    updates them when the slot is released, just after sending the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        after = endpoint.scrape()
        if (after - before).generation_tokens >= generated or time.monotonic() > deadline:
            return after
        time.sleep(0.1)
