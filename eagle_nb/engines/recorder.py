"""`eagle-nb record --engine vllm`: the target's greedy continuations and aux states recorded by
a vLLM engine (launched by the vLLM entry, vllm.py, or a server at `url`), written in the kit's own
recording format with the dtype the engine ran the target in, so a target that never loads in
transformers is replayed, swept and diagnosed offline like any other.

Per prompt one request (hidden_states.completion_body); the engine's file covers every fed
position (prompt + continuation minus its last token), which is what a record's `aux` holds. The
target itself is never loaded here: its config and, for `final_hidden`, its final norm weight and
lm_head are read lazily from the checkpoint (io.target_parts). Knows processes and files; the
vLLM specifics are hidden_states.py's.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from tqdm.auto import tqdm

from eagle_nb.engines import hidden_states as hs
from eagle_nb.engines.server import EngineError, http_get, http_post_json
from eagle_nb.io.target_parts import NOT_TEXT, TargetParts
from eagle_nb.recordings.recording_writer import RecordingWriter
from eagle_nb.model.layers import check_layer_ids

FINAL_AGREEMENT_MIN = 0.9     # below this, id L is not the pre-norm last-layer output
SCALED_NORM_TYPES = ("gemma", "gemma2", "gemma3", "gemma3_text")   # (1 + w) RMSNorm


def final_norm(parts: TargetParts) -> tuple[torch.Tensor, float]:
    """(weight, eps) of the target's final RMSNorm, read from its checkpoint (one tensor)."""
    c = parts.config
    if c.model_type in SCALED_NORM_TYPES:
        raise EngineError(f"{parts.path}: {c.model_type} scales its final norm by (1 + w); the final "
                          f"state is not supported for it, record without --final-hidden")
    cands = [k for k in parts.weight_map if k.endswith("norm.weight") and ".layers." not in k
             and not k.startswith("layers.") and not any(t in k.lower() for t in NOT_TEXT)
             and parts.shape(k) == (c.hidden_size,)]
    cands.sort(key=lambda k: (k.count("."), k))
    if not cands or (len(cands) > 1 and cands[0].count(".") == cands[1].count(".")):
        raise EngineError(f"{parts.path}: cannot tell the final norm among {cands or 'no'} "
                          f"(hidden_size,) tensors ending in 'norm.weight' outside the layers")
    eps = c.raw.get("rms_norm_eps", c.raw.get("layer_norm_epsilon"))
    if eps is None:
        raise EngineError(f"{c.name}: no rms_norm_eps for the final norm")
    return parts.tensor(cands[0]), float(eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """HF LlamaRMSNorm: in float32, then back to the input dtype, times the weight."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (weight.float() * h.to(x.dtype).float()).to(x.dtype)


def served_model(url: str) -> str:
    try:
        return json.loads(http_get(url + "/v1/models"))["data"][0]["id"]
    except (OSError, KeyError, IndexError, ValueError) as e:
        raise EngineError(f"{url}/v1/models did not name a served model ({type(e).__name__}: {e})") from None


def fetch(url: str, model: str, prompt_ids, n_tokens: int, n_layers: int,
          timeout: float = 600.0, cleanup: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """One prompt through the engine: (ids (T,) = prompt + n_tokens, states (T-1, n_layers, H))."""
    r = http_post_json(url + "/v1/completions", hs.completion_body(model, prompt_ids, n_tokens), timeout)
    out = r["choices"][0].get("token_ids")
    if out is None:
        raise EngineError(f"{url}: the completion carries no token_ids "
                          f"(this vLLM ignores `return_token_ids`)")
    path = hs.states_path(r, url)
    data = hs.read_states(path, timeout, cleanup=cleanup)
    full = torch.tensor([*prompt_ids, *out], dtype=torch.long)
    states, stored = data["hidden_states"], data["token_ids"].long()
    if len(out) != n_tokens:
        raise EngineError(f"{url}: asked for {n_tokens} tokens with ignore_eos, got {len(out)}")
    if stored.numel() == len(prompt_ids):
        raise EngineError(f"{path}: states for the prompt only: this vLLM ignores `include_output_tokens` "
                          f"(needs 0.24): {hs.UPGRADE}")
    if not torch.equal(stored, full[:-1]):
        raise EngineError(f"{path}: token_ids are not this request's prompt + output minus its last token")
    if states.dim() != 3 or states.shape[:2] != (full.numel() - 1, n_layers):
        raise EngineError(f"{path}: hidden_states {tuple(states.shape)}, expected ({full.numel() - 1}, "
                          f"{n_layers}, H): was the server started with these layer ids?")
    return full, states


def record_on_engine(target, prompts_ids, out_dir, layer_ids, *, dtype: str | None = None, max_new_tokens: int = 64,
                     lookahead: int = 8, final_hidden: bool = False, eos_token_id=None, url=None,
                     server=None, concurrency: int = 8, timeout: float = 600.0, target_name: str = "",
                     progress: bool = True, cleanup: bool = False, tensor_parallel_size: int = 1) -> Path:
    """Record `prompts_ids` (token-id lists or (1, T) tensors) on a vLLM engine into `out_dir`:
    `server` (started here if it is not, e.g. `vllm.hidden_states_server`) or the server at `url`
    (started with the documented flags and these ids); `vllm.record` launches one when neither is
    given. `dtype`: what the engine runs the target in (default: the server's, else "auto"), written
    into the recording (`target_dtype`; "auto" is resolved to the states' dtype). `layer_ids` are HF ids (the drafter's, any order); the
    recording holds them ascending, as every recording does. With `final_hidden`, id L is captured
    too and normalised here with the target's final norm. `cleanup` removes the engine's files."""
    prompts_ids = [torch.as_tensor(p).flatten().tolist() for p in prompts_ids]   # lists or (1, T) tensors
    dtype = dtype or getattr(server, "dtype", None) or "auto"
    parts = TargetParts(target)
    L = parts.config.num_hidden_layers
    ids = check_layer_ids(layer_ids, L)
    engine_ids = hs.engine_layer_ids(ids, [L] if final_hidden else [])
    n_tokens = max_new_tokens + lookahead
    if server is not None:
        server.start()
        url, served = server.url, getattr(server, "engine_layer_ids", engine_ids)
    else:
        url, served = url.rstrip("/"), engine_ids
    version = hs.server_version(url)
    hs.check_engine_version(version, tensor_parallel_size)
    cols, model = hs.columns(served, ids), served_model(url)
    lcol = hs.columns(served, [L])[0] if final_hidden else None
    norm = final_norm(parts) if final_hidden else None
    meta = {"source": f"vLLM {version} extract_hidden_states: the engine's greedy decoding "
                      f"(temperature 0, ignore_eos), one request per prompt",
            "engine": {"name": "vllm", "version": version, "url": "launched" if cleanup else url,
                       "layer_ids_engine": list(served), "dtype": dtype}}
    w = RecordingWriter(out_dir, ids, num_layers=L, target_name=target_name or str(target),
                        model_class=(parts.config.raw.get("architectures") or [""])[0],
                        max_new_tokens=max_new_tokens, lookahead=lookahead,
                        eos_token_id=eos_token_id, final_hidden=final_hidden, meta=meta)

    def one(p):
        return fetch(url, model, p, n_tokens, len(served), timeout, cleanup=cleanup)
    agree = None
    with ThreadPoolExecutor(max(1, concurrency)) as ex:
        for i, (full, states) in enumerate(tqdm(ex.map(one, prompts_ids), total=len(prompts_ids),
                                                desc=f"vLLM record {n_tokens} tokens",
                                                disable=not progress)):
            aux = states[:, cols].reshape(states.shape[0], -1)
            final = rms_norm(states[:, lcol], *norm) if norm else None
            if final is not None and i == 0:
                agree = final_agreement(parts, full, len(prompts_ids[0]), final)
            w.add(full, len(prompts_ids[i]), aux, final)
    if agree is not None:
        w.index["engine"]["final_greedy_agreement"] = agree
    # the dtype the engine ran the target in: the connector stores states in the model's dtype
    w.index["target_dtype"] = w.index["dtype"] if dtype == "auto" else dtype
    return w.close()


def final_agreement(parts: TargetParts, full: torch.Tensor, prompt_len: int, final: torch.Tensor) -> float:
    """Share of continuation positions where lm_head(final) picks the engine's next token: ~1 when
    the engine's id L is the last layer's pre-norm output (the kit's convention); an EngineError
    otherwise (a vLLM numbering its ids another way)."""
    logits = final[prompt_len - 1:].float() @ parts.lm_head().float().T
    share = float((logits.argmax(-1) == full[prompt_len:]).float().mean())
    if share < FINAL_AGREEMENT_MIN:
        raise EngineError(f"the engine's layer id {parts.config.num_hidden_layers}, normalised with the "
                          f"target's final norm, predicts the engine's own greedy tokens at only "
                          f"{share:.0%} of positions: this vLLM does not number layer ids as HF "
                          f"hidden_states indices (id L = last layer output before the final norm)")
    return share
