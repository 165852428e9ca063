"""Writing a drafter in one of the public formats (config text and weights), in a chosen dtype.

The config writers are the inverse of detect.py's readers; `save_drafter` writes atomically
(io/files.py `AtomicDir`). Knows nothing about conversion policy (convert.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from eagle_nb.checkpoints.detect import FORMATS
from eagle_nb.checkpoints.formats import unsupported_features
from eagle_nb.io.stream_write import from_tensor, write_safetensors
from eagle_nb.io.weight_files import WEIGHT_FILES, CheckpointError
from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.drafter import Eagle3Drafter
from eagle_nb.model.layers import from_hf


# -- writing ---------------------------------------------------------------------------------------
def _llama_dict(cfg: DrafterConfig, dtype: str) -> dict:
    return {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size, "num_attention_heads": cfg.num_attention_heads,
            "num_key_value_heads": cfg.num_key_value_heads, "head_dim": cfg.head_dim,
            "hidden_act": "silu", "rms_norm_eps": cfg.rms_norm_eps, "rope_theta": cfg.rope_theta,
            "rope_scaling": cfg.rope_scaling, "max_position_embeddings": cfg.max_position_embeddings,
            "vocab_size": cfg.vocab_size, "draft_vocab_size": cfg.draft_vocab_size,
            # NOTE: only when it differs: EAGLE's Model.__init__ copies the target's embedding only
            # when the config has NO target_hidden_size (hasattr), whatever its value.
            **({"target_hidden_size": cfg.target_hidden_size}
               if cfg.target_hidden_size != cfg.hidden_size else {}),
            **({"layer_types": ["sliding_attention"], "sliding_window": cfg.sliding_window}
               if cfg.sliding_window else {}),
            "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
            "torch_dtype": dtype}


def config_to_dict(cfg: DrafterConfig, fmt: str, dtype: str, verifier: str | None = None) -> dict:
    flags = {k: getattr(cfg, k) for k in ("norm_before_fc", "fc_norm", "norm_output",
                                          "norm_before_residual") if getattr(cfg, k)}
    if fmt == "speculators":
        return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
                "speculators_version": "0.3.0",
                "transformer_layer_config": _llama_dict(cfg, dtype),
                "draft_vocab_size": cfg.draft_vocab_size, "target_hidden_size": cfg.target_hidden_size,
                "eagle_aux_hidden_state_layer_ids": from_hf(cfg.aux_layer_ids, "speculators")
                if cfg.aux_layer_ids else None,
                "norm_before_residual": cfg.norm_before_residual, "norm_before_fc": cfg.norm_before_fc,
                "fc_norm": cfg.fc_norm, "norm_output": cfg.norm_output, "embed_requires_grad": False,
                "speculators_config": {
                    "algorithm": "eagle3", "default_proposal_method": "greedy",
                    "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 4,
                                          "verifier_accept_k": 1, "accept_tolerance": 0.0}],
                    "verifier": {"name_or_path": verifier, "architectures": ["LlamaForCausalLM"]}},
                "torch_dtype": dtype}
    d = {"architectures": ["LlamaForCausalLMEagle3" if fmt == "sglang" else "LlamaForCausalLM"],
         **_llama_dict(cfg, dtype), **flags}
    if fmt == "eagle" and cfg.rope_scaling and "type" not in cfg.rope_scaling:
        d["rope_scaling"] = {**cfg.rope_scaling, "type": cfg.rope_scaling.get("rope_type")}
    if cfg.aux_layer_ids:
        if fmt == "sglang":
            d["eagle_config"] = {"eagle_aux_hidden_state_layer_ids":
                                 from_hf(cfg.aux_layer_ids, "sglang-config"), "use_aux_hidden_state": True}
        else:
            d["eagle_aux_hidden_state_layer_ids"] = from_hf(cfg.aux_layer_ids, "vllm")
    return d


def save_drafter(drafter: Eagle3Drafter, out_dir, fmt: str, *, dtype=None, weights: str = "safetensors",
                 verifier: str | None = None, allow_lossy: bool = False,
                 embed: bool | None = None) -> Path:
    """Write `drafter` in format `fmt` into `out_dir` (replacing its config and weights files).
    `embed=None` follows the format: B omits `embed_tokens` (SGLang takes the target's); C
    includes it, as speculators does; A includes it only when target_hidden_size != hidden_size,
    the one case where EAGLE's loader does not copy the target's. `embed=True/False` overrides.
    Refuses (CheckpointError) a drafter with features the format's consumer cannot express
    (`unsupported_features`) unless `allow_lossy`, which writes them anyway (eagle_nb reads them
    back; that consumer ignores them).
    NOTE: writes in place; `convert` is the safe path for a user's directories."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")
    lost = unsupported_features(drafter.config, fmt)
    if lost and not allow_lossy:
        raise CheckpointError(f"format {fmt!r} cannot express {lost} (see README 'Formats'); "
                              f"its consumer would run a different drafter. Choose another format "
                              f"or pass allow_lossy=True (CLI: --allow-lossy)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtype = check_dtype(dtype or drafter.fc.weight.dtype, "dtype argument")
    c = drafter.config
    keep_embed = fmt == "speculators" or (fmt == "eagle" and c.target_hidden_size != c.hidden_size)
    state = {}
    for k, v in drafter.state_dict().items():
        if k == "embed_tokens.weight" and not (keep_embed if embed is None else embed):
            continue
        if fmt == "speculators" and k.startswith("midlayer."):
            k = "layers.0." + k[len("midlayer."):]
        state[k] = v.detach()
    cfg = config_to_dict(drafter.config, fmt, str(dtype).replace("torch.", ""), verifier)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for name in WEIGHT_FILES:
        (out / name).unlink(missing_ok=True)
    if weights == "bin":
        torch.save({k: (v.to(dtype) if v.is_floating_point() else v).cpu().contiguous()
                    for k, v in state.items()}, out / "pytorch_model.bin")
    else:   # tensor by tensor, cast chunk by chunk: no second copy of the drafter in memory
        write_safetensors(out / "model.safetensors",
                          [from_tensor(k, v, dtype if v.is_floating_point() else None)
                           for k, v in state.items()])
    return out


FLOAT_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def check_dtype(value, where: str) -> torch.dtype:
    """A float dtype the formats use (float32 / float16 / bfloat16), from a torch.dtype or its
    name; anything else is a CheckpointError naming `where` and the value."""
    if isinstance(value, torch.dtype) and value in FLOAT_DTYPES.values():
        return value
    if isinstance(value, str) and value.replace("torch.", "") in FLOAT_DTYPES:
        return FLOAT_DTYPES[value.replace("torch.", "")]
    raise CheckpointError(f"{where} = {value!r}: not a floating dtype the drafter formats use "
                          f"({sorted(FLOAT_DTYPES)})")


def source_dtype(raw_cfg: dict, where: str, default=torch.float32) -> torch.dtype | None:
    """The dtype a config declares: transformers-5 `dtype`, else `torch_dtype` (top level, then
    speculators' transformer_layer_config); `default` when none is given."""
    layer = raw_cfg.get("transformer_layer_config")
    for scope, d in (("", raw_cfg), ("transformer_layer_config.", layer if isinstance(layer, dict) else {})):
        for name in ("dtype", "torch_dtype"):
            if d.get(name) is not None:
                return check_dtype(d[name], f"{where}: field {scope + name!r}")
    return default
