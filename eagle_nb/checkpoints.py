"""Load, detect, validate, save and convert EAGLE-3 drafter checkpoints in the public formats.

  A "eagle"        SafeAILab EAGLE: plain Llama config + draft_vocab_size, `midlayer.*`, ids implicit
  B "sglang"       SGLang/SpecForge: `LlamaForCausalLMEagle3`, nested eagle_config ids (output-of-layer)
  C "speculators"  vLLM speculators: `speculators_model_type: eagle3`, `layers.0.*`, top-level HF ids

A converter is a key map plus a strict load (reference/eagle3.md §2). Weights are read with
safetensors or `torch.load(weights_only=True)`: loading never executes checkpoint code.
`load_drafter_engine_style` is an ABLATION that drops unknown names and keeps random init, as
SGLang's loader does; it exists for the notebooks only.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch

from .capture import eagle3_layers, from_hf, to_hf
from .config import ConfigError, DrafterConfig, from_llama_dict
from .drafter import Eagle3Drafter, rope_inv_freq
from .validate import (Report, check_against_target, check_d2t_t2d, check_fc_width,
                       check_finite, check_shapes)

FORMATS = ("eagle", "sglang", "speculators")
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

# checkpoint key -> our key; None drops the key. `{}` is the rest of the name.
KEY_MAPS = {
    "eagle": {"midlayer.{}": "midlayer.{}"},
    "sglang": {"midlayer.{}": "midlayer.{}"},
    "speculators": {"layers.0.{}": "midlayer.{}", "verifier_lm_head.weight": None,
                    "verifier_norm.weight": None},
}
TOP_LEVEL = ("fc.weight", "norm.weight", "lm_head.weight", "embed_tokens.weight", "d2t", "t2d",
             "input_norm.weight")


class CheckpointError(ValueError):
    """A drafter checkpoint cannot be loaded as asked; the message names the file and fault."""


# -- reading ---------------------------------------------------------------------------------------
def read_config(path: Path) -> dict:
    f = Path(path) / "config.json"
    if not f.exists():
        raise CheckpointError(f"{path}: no config.json")
    try:
        return json.loads(f.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{f}: invalid JSON ({e})") from None


def detect_format(cfg: dict) -> str:
    if cfg.get("speculators_model_type") is not None:
        if cfg["speculators_model_type"] != "eagle3":
            raise CheckpointError(f"speculators_model_type {cfg['speculators_model_type']!r} is not eagle3")
        return "speculators"
    archs = cfg.get("architectures") or []
    if any("Eagle3" in a for a in archs) or "eagle_config" in cfg:
        return "sglang"
    if "draft_vocab_size" in cfg or cfg.get("num_hidden_layers") == 1:
        return "eagle"
    raise CheckpointError(f"config architectures {archs}: not a recognisable EAGLE-3 drafter "
                          f"(no speculators_model_type, no Eagle3 architecture, no draft_vocab_size)")


def config_from_dict(cfg: dict, fmt: str, where: str) -> DrafterConfig:
    """Per-format config reader; layer ids are translated to the HF convention."""
    if fmt == "speculators":
        layer = cfg.get("transformer_layer_config")
        if not isinstance(layer, dict):
            raise ConfigError(f"{where}: missing required field 'transformer_layer_config'")
        d = dict(layer, draft_vocab_size=cfg.get("draft_vocab_size"),
                 target_hidden_size=cfg.get("target_hidden_size"))
        ids = cfg.get("eagle_aux_hidden_state_layer_ids")
        out = from_llama_dict(d, where, to_hf(ids, "speculators") if ids else None)
        for k in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
            setattr(out, k, bool(cfg.get(k, False)))
        out.extra = {"speculators_config": cfg.get("speculators_config")}
        return out
    if fmt == "sglang":
        nested = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
        out = from_llama_dict(cfg, where, to_hf(nested, "sglang-config") if nested else None)
        out.extra = {"sglang_config_ids": nested}
    else:
        top = cfg.get("eagle_aux_hidden_state_layer_ids")  # vLLM convention, when present
        out = from_llama_dict(cfg, where, to_hf(top, "vllm") if top else None)
    for k in ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual"):
        setattr(out, k, bool(cfg.get(k, False)))
    return out


def _weights_file(path: Path) -> Path:
    for name in WEIGHT_FILES:
        if (path / name).exists():
            return path / name
    raise CheckpointError(f"{path}: no weights file (looked for {list(WEIGHT_FILES)})")


def read_weights(path: Path) -> tuple[dict[str, torch.Tensor], Path]:
    f = _weights_file(Path(path))
    try:
        if f.suffix == ".safetensors":
            from safetensors.torch import load_file
            return load_file(str(f)), f
        return torch.load(f, map_location="cpu", weights_only=True), f
    except Exception as e:  # noqa: BLE001 - any reader failure is a corrupt file to the user
        kind = "refused to unpickle (weights_only=True; it holds code or objects)" \
            if "weights_only" in str(e) or "Unpickl" in type(e).__name__ else "corrupt or truncated"
        raise CheckpointError(f"{f}: {kind}: {type(e).__name__}: {str(e)[:200]}") from None


def rename(state: dict, fmt: str, origin: dict | None = None) -> tuple[dict, list[str]]:
    """Apply the format's key map. Returns (renamed, unexpected keys); fills `origin` (our key ->
    checkpoint key) when given, for error messages."""
    out, unexpected = {}, []
    table = KEY_MAPS[fmt]
    for k, v in state.items():
        ours = None
        if k in TOP_LEVEL or re.fullmatch(r"fc_norm\.\d+\.weight", k):
            ours = k
        else:
            for src, dst in table.items():
                m = re.fullmatch(re.escape(src).replace(r"\{\}", "(.+)"), k)
                if m:
                    if dst is not None:
                        ours = dst.replace("{}", m.group(1)) if m.groups() else dst
                    break
            else:
                unexpected.append(k)
        if ours is not None:
            out[ours] = v
            if origin is not None:
                origin[ours] = k
    return out, unexpected


def expected_shapes(cfg: DrafterConfig) -> dict:
    with torch.device("meta"):
        model = Eagle3Drafter(cfg)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


OPTIONAL = ("embed_tokens.weight", "d2t", "t2d")


def _ids_as_written(cfg: dict) -> dict | None:
    """Where and how a config writes the aux layer ids (before any translation)."""
    nested = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    if nested is not None:
        return {"field": "eagle_config.eagle_aux_hidden_state_layer_ids", "ids": list(nested),
                "convention": "sglang-config"}
    top = cfg.get("eagle_aux_hidden_state_layer_ids")
    if top is not None:
        return {"field": "eagle_aux_hidden_state_layer_ids", "ids": list(top), "convention": "vllm"}
    return None


def inspect_checkpoint(path, target_config=None) -> tuple[Report, dict]:
    """Read and validate without building a model. Returns (report, renamed state dict)."""
    path = Path(path)
    rep = Report(str(path))
    raw_cfg = read_config(path)
    rep.format = detect_format(raw_cfg)
    try:
        rep.config = cfg = config_from_dict(raw_cfg, rep.format, str(path / "config.json"))
    except (ConfigError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path / 'config.json'}: {e}") from None
    rep.ids_as_written = _ids_as_written(raw_cfg)
    raw, wfile = read_weights(path)
    rep.notes["weights_file"] = wfile.name
    origin: dict = {}
    state, rep.unexpected = rename(raw, rep.format, origin)
    ours_of = {ck: ours for ours, ck in origin.items()}
    rep.key_names = {k: (ours_of.get(k), tuple(v.shape)) for k, v in raw.items()}
    shapes = expected_shapes(cfg)
    for k in [k for k in state if k not in shapes]:   # e.g. q_norm under `midlayer.`: no such param
        rep.unexpected.append(origin.get(k, k))
        del state[k]
    rep.missing = [k for k in shapes if k not in state and k not in OPTIONAL]
    if rep.missing or rep.unexpected:
        hint = ""
        if any(k.startswith("layers.0.") for k in rep.unexpected):
            hint = " (`layers.0.*` are speculators-format names; this config says format " \
                   f"{rep.format!r}, which uses `midlayer.*`)"
        elif any(k.startswith("midlayer.") for k in rep.unexpected):
            hint = " (`midlayer.*` are EAGLE/SGLang names in a speculators-format checkpoint)"
        rep.problems.append(f"{wfile}: missing keys {rep.missing}, unexpected keys {rep.unexpected}{hint}")
    check_shapes(state, {k: v for k, v in shapes.items() if k not in ("d2t", "t2d")}, rep, str(wfile))
    check_fc_width(state, cfg, rep)
    check_finite(state, rep)
    check_d2t_t2d(state.get("d2t"), state.get("t2d"), cfg, rep)
    emb = state.get("embed_tokens.weight")
    rep.notes["has_embed_tokens"] = emb is not None
    if target_config is not None:
        check_against_target(cfg, target_config, None if emb is None else emb.shape, rep)
    if cfg.aux_layer_ids is None:   # format A / B without ids: the EAGLE default, implicit
        L = getattr(target_config, "num_hidden_layers", None)
        rep.notes["aux_layer_ids_implied"] = (list(eagle3_layers(L)) if L else
                                              "EAGLE default {2, L//2, L-3} (pass --target to resolve)")
    rep.notes["num_params"] = int(sum(v.numel() for v in state.values() if v.is_floating_point()))
    rep.notes["dtype"] = str(next(v.dtype for v in state.values() if v.is_floating_point()))
    return rep, state


def _target_parts(target):
    """(config, input embedding weight) of a target given as a path or a loaded model."""
    if target is None:
        return None, None
    if isinstance(target, (str, Path)):
        from .targets import load_target
        target, _ = load_target(target, device="cpu")
    return target.config.get_text_config() if hasattr(target.config, "get_text_config") \
        else target.config, target.get_input_embeddings().weight


def load_drafter(path, target=None, *, dtype=torch.float32, device=None) -> Eagle3Drafter:
    """Load a drafter in any format, strictly. `target` (path or model) supplies `embed_tokens`
    when the checkpoint has none and is checked against the drafter. Raises CheckpointError
    listing every problem."""
    tcfg, temb = _target_parts(target)
    rep, state = inspect_checkpoint(path, tcfg)
    if "embed_tokens.weight" not in state:
        if temb is None:
            rep.problems.append(f"{path}: checkpoint has no embed_tokens.weight; pass target= "
                                f"(a path or model) to take it from the target")
        elif tuple(temb.shape) != (rep.config.vocab_size, rep.config.hidden_size):
            rep.problems.append(f"target embedding {tuple(temb.shape)} != (vocab_size, hidden_size)"
                                f" = ({rep.config.vocab_size}, {rep.config.hidden_size})")
        else:
            state["embed_tokens.weight"] = temb.detach().to("cpu")
    if not rep.ok:
        raise CheckpointError(f"cannot load drafter {path} (format {rep.format}):\n  - "
                              + "\n  - ".join(rep.problems))
    return _build(rep.config, state, dtype, device)


def _complete_vocab_buffers(cfg: DrafterConfig, state: dict) -> None:
    Vd, V = cfg.draft_vocab_size, cfg.vocab_size
    if "d2t" not in state:
        state["d2t"] = torch.zeros(Vd, dtype=torch.long)
    if "t2d" not in state:
        t2d = torch.zeros(V, dtype=torch.bool)
        t2d[torch.arange(Vd) + state["d2t"].long()] = True
        state["t2d"] = t2d


def _build(cfg: DrafterConfig, state: dict, dtype, device) -> Eagle3Drafter:
    _complete_vocab_buffers(cfg, state)
    with torch.device("meta"):
        model = Eagle3Drafter(cfg)
    state = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in state.items()}
    model.load_state_dict(state, strict=True, assign=True)
    model.inv_freq = rope_inv_freq(cfg)  # non-persistent buffer, still on meta: recompute
    return model.to(device or "cpu").eval()


def load_drafter_engine_style(path, target, seed: int = 0) -> tuple[Eagle3Drafter, dict]:
    """ABLATION: SGLang-style non-strict load. Names are taken as the `midlayer.*` engine expects;
    names that match no parameter are dropped and parameters that get no weight keep their random
    init, with no error. Returns (drafter, {"dropped": [...], "left_random": [...]})."""
    tcfg, temb = _target_parts(target)
    raw_cfg = read_config(Path(path))
    fmt = detect_format(raw_cfg)
    cfg = config_from_dict(raw_cfg, fmt, str(path))
    raw, _ = read_weights(Path(path))
    torch.manual_seed(seed)
    model = Eagle3Drafter(cfg)
    own = model.state_dict()
    loaded = {k: v for k, v in raw.items() if k in own and tuple(v.shape) == tuple(own[k].shape)}
    dropped = [k for k in raw if k not in loaded]
    if temb is not None:  # SGLang always shares the target embedding
        loaded["embed_tokens.weight"] = temb.detach().cpu()
    model.load_state_dict(loaded, strict=False)
    left = [k for k in own if k not in loaded]
    return model.float().eval(), {"dropped": dropped, "left_random": left}


# -- writing ---------------------------------------------------------------------------------------
def _llama_dict(cfg: DrafterConfig, dtype: str) -> dict:
    return {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": cfg.hidden_size,
            "intermediate_size": cfg.intermediate_size, "num_attention_heads": cfg.num_attention_heads,
            "num_key_value_heads": cfg.num_key_value_heads, "head_dim": cfg.head_dim,
            "hidden_act": "silu", "rms_norm_eps": cfg.rms_norm_eps, "rope_theta": cfg.rope_theta,
            "rope_scaling": cfg.rope_scaling, "max_position_embeddings": cfg.max_position_embeddings,
            "vocab_size": cfg.vocab_size, "draft_vocab_size": cfg.draft_vocab_size,
            "target_hidden_size": cfg.target_hidden_size, "tie_word_embeddings": False,
            "attention_bias": False, "mlp_bias": False, "torch_dtype": dtype}


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
    if cfg.aux_layer_ids:
        if fmt == "sglang":
            d["eagle_config"] = {"eagle_aux_hidden_state_layer_ids":
                                 from_hf(cfg.aux_layer_ids, "sglang-config"), "use_aux_hidden_state": True}
        else:
            d["eagle_aux_hidden_state_layer_ids"] = from_hf(cfg.aux_layer_ids, "vllm")
    return d


def save_drafter(drafter: Eagle3Drafter, out_dir, fmt: str, *, dtype=None, weights: str = "safetensors",
                 verifier: str | None = None) -> Path:
    """Write `drafter` in format `fmt`. A and B omit `embed_tokens` (the engines take the target's);
    C includes it, as speculators does."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtype = dtype or drafter.fc.weight.dtype
    state = {}
    for k, v in drafter.state_dict().items():
        if k == "embed_tokens.weight" and fmt != "speculators":
            continue
        if fmt == "speculators" and k.startswith("midlayer."):
            k = "layers.0." + k[len("midlayer."):]
        state[k] = (v.to(dtype) if v.is_floating_point() else v).detach().cpu().contiguous()
    cfg = config_to_dict(drafter.config, fmt, str(dtype).replace("torch.", ""), verifier)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for name in WEIGHT_FILES:
        (out / name).unlink(missing_ok=True)
    if weights == "bin":
        torch.save(state, out / "pytorch_model.bin")
    else:
        from safetensors.torch import save_file
        save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
        # NOTE: safetensors creates the file 0600; give it the mode any other file here gets
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(out / "model.safetensors", 0o666 & ~umask)
    return out


def convert(src, dst, to: str, target=None, dtype=None) -> Path:
    """Strict load in any format, then save in format `to`; layer ids are translated by the
    config writers, never copied."""
    drafter = load_drafter(src, target, dtype=torch.float32)
    src_dtype = getattr(torch, read_config(Path(src)).get("torch_dtype") or "float32", torch.float32)
    return save_drafter(drafter, dst, to, dtype=dtype or src_dtype)
