"""Load, detect, validate, save and convert EAGLE-3 drafter checkpoints in the public formats.

  A "eagle"        SafeAILab EAGLE: plain Llama config + draft_vocab_size, `midlayer.*`, ids implicit
  B "sglang"       SGLang/SpecForge: `LlamaForCausalLMEagle3`, nested eagle_config ids (output-of-layer)
  C "speculators"  vLLM speculators: `speculators_model_type: eagle3`, `layers.0.*`, top-level HF ids

A converter is a key map plus a strict load (reference/eagle3.md §2). Weights are read by
weight_files.py with safetensors or `torch.load(weights_only=True)`: loading never executes
checkpoint code. `convert` never writes over a directory it was not asked to replace (files.py).
`load_drafter_engine_style` is an ABLATION that drops unknown names and keeps random init, as
SGLang's loader does (by default as SGLang <= 0.5.11, which drops `layers.0.*`); it exists for the
notebooks only.
"""
from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import torch

from .capture import eagle3_layers, from_hf, sglang_version_tuple, to_hf
from .config import ConfigError, DrafterConfig, check_bool, check_layer_ids, from_llama_dict
from .drafter import FEEDBACK_SERVING, Eagle3Drafter, rope_inv_freq
from .files import AtomicDir, UserFileError, check_destination, is_dir, read_json_object, show
from .formats import split_harmless, train_serve_warnings, unsupported_features
from .validate import (Report, check_against_target, check_d2t_t2d, check_fc_width,
                       check_finite, check_shapes)
from .weight_files import WEIGHT_FILES, CheckpointError, read_weights

FORMATS = ("eagle", "sglang", "speculators")

# checkpoint key -> our key; None drops the key. `{}` is the rest of the name.
KEY_MAPS = {
    "eagle": {"midlayer.{}": "midlayer.{}"},
    "sglang": {"midlayer.{}": "midlayer.{}"},
    "speculators": {"layers.0.{}": "midlayer.{}", "verifier_lm_head.weight": None,
                    "verifier_norm.weight": None},
}
TOP_LEVEL = ("fc.weight", "norm.weight", "lm_head.weight", "embed_tokens.weight", "d2t", "t2d",
             "input_norm.weight")


class CheckpointWarning(UserWarning):
    """A drafter checkpoint loads, but carried something that was ignored; the message names it."""


# -- reading ---------------------------------------------------------------------------------------
def read_config(path: Path) -> dict:
    """config.json of a checkpoint directory: a regular UTF-8 file holding a JSON object."""
    path = Path(path)
    if not is_dir(path):
        what = "a file" if path.exists() else "missing"
        raise CheckpointError(f"{show(path)}: {what}; expected a checkpoint directory holding "
                              f"config.json and the weights")
    f = path / "config.json"
    if not os.path.lexists(f):
        raise CheckpointError(f"{show(path)}: no config.json")
    try:
        return read_json_object(f, "config")
    except UserFileError as e:
        raise CheckpointError(str(e)) from None


def detect_format(cfg: dict) -> str:
    if cfg.get("speculators_model_type") is not None:
        if cfg["speculators_model_type"] != "eagle3":
            raise CheckpointError(f"speculators_model_type {cfg['speculators_model_type']!r} is not eagle3")
        return "speculators"
    archs = cfg.get("architectures") or []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise CheckpointError(f"config field architectures must be a list of class names, got {archs!r}")
    if any("Eagle3" in a for a in archs) or "eagle_config" in cfg:
        return "sglang"
    if "draft_vocab_size" in cfg or cfg.get("num_hidden_layers") == 1:
        return "eagle"
    raise CheckpointError(f"config architectures {archs}: not a recognisable EAGLE-3 drafter "
                          f"(no speculators_model_type, no Eagle3 architecture, no draft_vocab_size)")


def _flag(cfg: dict, k: str) -> bool:
    return check_bool(k, cfg.get(k, False))


def _ids(value, name: str, convention: str):
    return to_hf(check_layer_ids(name, value), convention) if value is not None else None


def config_from_dict(cfg: dict, fmt: str, where: str) -> DrafterConfig:
    """Per-format config reader; layer ids are translated to the HF convention."""
    if fmt == "speculators":
        layer = cfg.get("transformer_layer_config")
        if not isinstance(layer, dict):
            raise ConfigError(f"{where}: missing required field 'transformer_layer_config'")
        d = dict(layer, draft_vocab_size=cfg.get("draft_vocab_size"),
                 target_hidden_size=cfg.get("target_hidden_size"))
        ids = _ids(cfg.get("eagle_aux_hidden_state_layer_ids"), "eagle_aux_hidden_state_layer_ids",
                   "speculators")
        out = from_llama_dict(d, where, ids)
        for k in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
            setattr(out, k, _flag(cfg, k))
        out.extra = {"speculators_config": cfg.get("speculators_config")}
        return out
    if fmt == "sglang":
        eagle_config = cfg.get("eagle_config") or {}
        if not isinstance(eagle_config, dict):
            raise ConfigError(f"eagle_config must be an object, got {eagle_config!r}")
        nested = eagle_config.get("eagle_aux_hidden_state_layer_ids")
        out = from_llama_dict(cfg, where, _ids(nested, "eagle_config.eagle_aux_hidden_state_layer_ids",
                                               "sglang-config"))
        out.extra = {"sglang_config_ids": nested}
    else:
        top = cfg.get("eagle_aux_hidden_state_layer_ids")  # vLLM convention, when present
        out = from_llama_dict(cfg, where, _ids(top, "eagle_aux_hidden_state_layer_ids", "vllm"))
    for k in ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual"):
        setattr(out, k, _flag(cfg, k))
    return out


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
    try:
        rep.format = detect_format(raw_cfg)
    except CheckpointError as e:
        raise CheckpointError(f"{show(path / 'config.json')}: {e}") from None
    try:
        rep.config = cfg = config_from_dict(raw_cfg, rep.format, str(path / "config.json"))
    except (ConfigError, KeyError, TypeError) as e:
        raise CheckpointError(f"{show(path / 'config.json')}: {e}") from None
    rep.ids_as_written = _ids_as_written(raw_cfg)
    raw, wfile = read_weights(path)
    rep.notes["weights_file"] = wfile.name
    origin: dict = {}
    state, unexpected = rename(raw, rep.format, origin)
    rep.unexpected, ignored, notes = split_harmless(unexpected, str(wfile))
    rep.warnings += notes
    rep.notes["ignored_extras"] = ignored
    ours_of = {ck: ours for ours, ck in origin.items()}
    rep.key_names = {k: (ours_of.get(k), tuple(v.shape)) for k, v in raw.items()}
    try:
        shapes = expected_shapes(cfg)
    except ConfigError as e:            # e.g. a rope_scaling type the drafter does not implement
        raise CheckpointError(f"{show(path / 'config.json')}: {e}") from None
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
    quantized = {k: str(v.dtype).replace("torch.", "") for k, v in state.items()
                 if k not in ("d2t", "t2d") and not v.is_floating_point()}
    if quantized:
        raise CheckpointError(
            f"{show(wfile)}: quantized drafter weights are not supported: "
            f"{dict(list(quantized.items())[:4])}{' ...' if len(quantized) > 4 else ''} are integer "
            f"tensors (int8/uint8/int4 packing needs scales this kit does not read); load the "
            f"unquantized bf16/fp16/fp32 checkpoint instead")
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
    rep.warnings += train_serve_warnings(raw_cfg, cfg, rep.format)
    rep.notes["num_params"] = int(sum(v.numel() for v in state.values() if v.is_floating_point()))
    rep.notes["dtype"] = str(next((v.dtype for v in state.values() if v.is_floating_point()), None))
    return rep, state


def _target_parts(target):
    """(config, input embedding weight) of a target given as a path or a loaded model."""
    if target is None:
        return None, None
    if isinstance(target, (str, Path)):   # never load the model: config + one tensor, lazily
        from .target_parts import TargetParts, TargetPartsError
        try:
            parts = TargetParts(target)
            return parts.config, parts.embed_tokens()
        except TargetPartsError as e:
            raise CheckpointError(str(e)) from None
    elif not hasattr(target, "get_input_embeddings"):
        raise TypeError(f"target must be a checkpoint path or a loaded HF model, got {type(target).__name__}")
    return target.config.get_text_config() if hasattr(target.config, "get_text_config") \
        else target.config, target.get_input_embeddings().weight


def load_drafter(path, target=None, *, dtype=torch.float32, device=None,
                 feedback: str = FEEDBACK_SERVING) -> Eagle3Drafter:
    """Load a drafter in any format, strictly. `target` (path or model) supplies `embed_tokens`
    when the checkpoint has none and is checked against the drafter. `feedback` is the state fed
    back across draft steps (drafter.py: "serving" as SGLang/vLLM, or "pre-norm" as SpecForge
    trains). Known-harmless extras (frozen-target buffers, optimizer leftovers) are dropped with a
    CheckpointWarning naming them. Raises CheckpointError listing every problem."""
    model = _load(path, target, dtype, device)[0]
    model.set_feedback(feedback)
    return model


def _load(path, target, dtype, device) -> tuple[Eagle3Drafter, Report, torch.Tensor | None]:
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
    for w in rep.warnings:
        if "not drafter state" in w:
            warnings.warn(w, CheckpointWarning, stacklevel=3)
    return _build(rep.config, state, dtype, device), rep, temb


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


def load_drafter_engine_style(path, target, seed: int = 0,
                              sglang_version: str = "0.5.11") -> tuple[Eagle3Drafter, dict]:
    """ABLATION: SGLang-style non-strict load. Names that match no parameter are dropped and
    parameters that get no weight keep their random init, with no error. SGLang <= 0.5.11 (the
    default here) knows only `midlayer.*`, so a speculators `layers.0.*` checkpoint loads with a
    random decoder layer; from 0.5.12 its draft module is `layers` and `midlayer` is renamed to
    `layers.0`, so both spellings load (read in the released wheels' llama_eagle3.py).
    Returns (drafter, {"dropped": [...], "left_random": [...]})."""
    tcfg, temb = _target_parts(target)
    raw_cfg = read_config(Path(path))
    try:
        fmt = detect_format(raw_cfg)
        cfg = config_from_dict(raw_cfg, fmt, str(path))
    except ConfigError as e:            # name the file
        raise CheckpointError(f"{show(Path(path) / 'config.json')}: {e}") from None
    raw, _ = read_weights(Path(path))
    if sglang_version_tuple(sglang_version) >= (0, 5, 12):   # both spellings reach the one layer
        raw = {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v
               for k, v in raw.items()}
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
            # NOTE: only when it differs: EAGLE's Model.__init__ copies the target's embedding only
            # when the config has NO target_hidden_size (hasattr), whatever its value.
            **({"target_hidden_size": cfg.target_hidden_size}
               if cfg.target_hidden_size != cfg.hidden_size else {}),
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


def source_dtype(raw_cfg: dict, where: str) -> torch.dtype:
    """The dtype a config declares: transformers-5 `dtype`, else `torch_dtype` (top level, then
    speculators' transformer_layer_config); float32 when none is given."""
    layer = raw_cfg.get("transformer_layer_config")
    for scope, d in (("", raw_cfg), ("transformer_layer_config.", layer if isinstance(layer, dict) else {})):
        for name in ("dtype", "torch_dtype"):
            if d.get(name) is not None:
                return check_dtype(d[name], f"{where}: field {scope + name!r}")
    return torch.float32


def _embed_policy(rep: Report, drafter: Eagle3Drafter, temb, to: str, drop_embed: bool) -> tuple[bool, str]:
    """(store embed_tokens in the output?, the sentence saying so). A drafter's own embedding is
    never dropped silently: SGLang replaces it with the target's (reference/eagle3.md §9 row 14),
    so format B needs `drop_embed` unless the two are identical."""
    own = rep.notes.get("has_embed_tokens")
    if to == "speculators":
        return True, ("embed_tokens: stored, the source's own" if own else
                      "embed_tokens: stored, taken from the target (the source has none)")
    if not own:
        return False, "embed_tokens: not stored (the source has none); engines use the target's"
    # the source may store the target's embedding rounded to its own dtype (fp16 drafters do)
    src_dtype = getattr(torch, str(rep.notes.get("dtype")).replace("torch.", ""), torch.float32)
    same = temb is not None and tuple(temb.shape) == tuple(drafter.embed_tokens.weight.shape) and \
        torch.equal(temb.detach().cpu().to(src_dtype).float(), drafter.embed_tokens.weight.detach().float().cpu())
    if same:
        return False, (f"embed_tokens: not stored; the source's own is the target's (equal at the "
                       f"source's {str(src_dtype).replace('torch.', '')} precision)")
    if drop_embed:
        return False, ("embed_tokens: NOT stored (--drop-embed): the engines will use the TARGET's "
                       "embedding, not the one this drafter was trained with")
    if to == "eagle":
        return True, ("embed_tokens: stored, the source's own (vLLM loads a drafter's own embedding "
                      "when present; SGLang always uses the target's)")
    diff = "" if temb is None else " and differs from the target's"
    raise CheckpointError(
        f"the source drafter carries its own embed_tokens{diff}, but SGLang replaces a drafter's "
        f"embedding with the target's, so the converted drafter would not be the same model. Convert "
        f"to 'eagle' or 'speculators' (both keep it), pass --target if the embedding is the "
        f"target's (checked for equality), or pass --drop-embed (drop_embed=True) to accept the "
        f"target's embedding; nothing was written")


def convert(src, dst, to: str, target=None, dtype=None, *, allow_lossy: bool = False,
            force: bool = False, drop_embed: bool = False, notes: list | None = None) -> Path:
    """Strict load in any format, then save in format `to` in the source's dtype (or `dtype`);
    layer ids are translated by the config writers, never copied. Refuses a destination format
    that cannot express the source's features unless `allow_lossy`. `dst` must be new or empty
    unless `force` (then it is replaced entirely); it can never be or contain `src`. The output is
    written to a temporary directory beside `dst` and renamed into place. `notes` (a list)
    receives what was decided about `embed_tokens`, for the CLI to print."""
    if to not in FORMATS:
        raise ValueError(f"unknown format {to!r}; choose from {FORMATS}")
    try:
        check_destination(dst, force, protect=(src, target))
    except UserFileError as e:
        raise CheckpointError(str(e)) from None
    src_dtype = source_dtype(read_config(Path(src)), str(Path(src) / "config.json"))
    out_dtype = src_dtype if dtype is None else check_dtype(dtype, "dtype argument")
    drafter, rep, temb = _load(src, target, torch.float32, None)
    lost = unsupported_features(drafter.config, to)
    if lost and not allow_lossy:
        raise CheckpointError(f"cannot convert {src} to format {to!r}: that format cannot express "
                              f"{lost} (see README 'Formats'); pass allow_lossy=True "
                              f"(CLI: --allow-lossy) to write it anyway; nothing was written")
    store_embed, note = _embed_policy(rep, drafter, temb, to, drop_embed)
    with AtomicDir(dst) as tmp:
        save_drafter(drafter, tmp, to, dtype=out_dtype, allow_lossy=allow_lossy, embed=store_embed)
    if notes is not None:
        notes.append(note)
    return Path(dst)
