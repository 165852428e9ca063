"""Which public format a drafter checkpoint is in, and its config as a `DrafterConfig`.

  A "eagle"        SafeAILab EAGLE: plain Llama config + draft_vocab_size, `midlayer.*`, ids implicit
  B "sglang"       SGLang/SpecForge: `LlamaForCausalLMEagle3`, nested eagle_config ids (output-of-layer)
  C "speculators"  vLLM speculators: `speculators_model_type: eagle3`, `layers.0.*`, top-level HF ids

A converter is a key map (`KEY_MAPS`) plus a strict load (docs/formats.md).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

from eagle_nb.io.files import UserFileError, absent, is_dir, read_json_object, show
from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.model.config import (
    ConfigError,
    DrafterConfig,
    check_bool,
    check_layer_ids,
    from_llama_dict,
)
from eagle_nb.model.drafter import Eagle3Drafter
from eagle_nb.model.layers import to_hf

from eagle_nb.checkpoints.formats import FORMATS  # noqa: E402,F401 - re-exported


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
        what = "a file" if path.exists() else absent(path)
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
        top = cfg.get("eagle_aux_hidden_state_layer_ids")   # vLLM's field, when only it is written
        ids = _ids(nested, "eagle_config.eagle_aux_hidden_state_layer_ids", "sglang-config") \
            if nested is not None else _ids(top, "eagle_aux_hidden_state_layer_ids", "vllm")
        out = from_llama_dict(cfg, where, ids)
        out.extra = {"sglang_config_ids": nested}
        if nested is not None and top is not None and \
                sorted(_ids(top, "eagle_aux_hidden_state_layer_ids", "vllm")) != out.aux_layer_ids:
            out.extra["ids_disagree"] = (f"eagle_config.eagle_aux_hidden_state_layer_ids {nested} "
                                         f"(SGLang reads it) and eagle_aux_hidden_state_layer_ids "
                                         f"{top} (vLLM reads it) name different layers")
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


def ids_as_written_in(cfg: dict) -> dict | None:
    """Where and how a config writes the aux layer ids (before any translation)."""
    nested = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    if nested is not None:
        return {"field": "eagle_config.eagle_aux_hidden_state_layer_ids", "ids": list(nested),
                "convention": "sglang-config"}
    top = cfg.get("eagle_aux_hidden_state_layer_ids")
    if top is not None:
        return {"field": "eagle_aux_hidden_state_layer_ids", "ids": list(top), "convention": "vllm"}
    return None
