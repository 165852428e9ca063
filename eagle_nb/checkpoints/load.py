"""Loading a drafter checkpoint into `Eagle3Drafter` with a strict key map.

Weights are memory-mapped by io/lazy_weights.py (safetensors headers parsed, `.bin` through
`torch.load(weights_only=True, mmap=True)`): loading never executes checkpoint code, keeps the
file's dtype unless `dtype=` asks otherwise, and copies nothing it does not cast, so a drafter
costs about its file size plus, when borrowed, the rows of the target's embedding it reads.
`load_drafter_engine_style` is an ABLATION that drops unknown names and keeps random init, as
SGLang's loader does (by default as SGLang <= 0.5.11, which drops `layers.0.*`); it exists for
the notebooks and the fault registry only.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from eagle_nb.checkpoints.detect import (
    CheckpointWarning,
    config_from_dict,
    detect_format,
    read_config,
)
from eagle_nb.checkpoints.inspect import inspect_checkpoint
from eagle_nb.checkpoints.validate import Report, check_finite_streamed
from eagle_nb.io.files import show
from eagle_nb.io.lazy_weights import LazyState
from eagle_nb.io.weight_files import CheckpointError, read_weights
from eagle_nb.model.config import ConfigError, DrafterConfig
from eagle_nb.model.drafter import FEEDBACK_SERVING, Eagle3Drafter, rope_inv_freq
from eagle_nb.model.layers import sglang_version_tuple

EMBED = "embed_tokens.weight"


def target_embedding(target) -> tuple[object, dict]:
    """(text config, {"embed_tokens.weight": the target's input embedding}) for a target given as
    a path (a memory-mapped view, streamed from its file by io/lazy_weights.py `stream`) or a
    loaded model; (None, {}) without a target."""
    if target is None:
        return None, {}
    if isinstance(target, (str, Path)):   # never load the model: config + one tensor, lazily
        from eagle_nb.io.target_parts import TargetParts, TargetPartsError
        try:
            parts = TargetParts(target)
            key = parts.embed_key()
            return parts.config, LazyState({EMBED: parts.mapped(key)}, parts, {EMBED: key})
        except TargetPartsError as e:
            raise CheckpointError(str(e)) from None
    elif not hasattr(target, "get_input_embeddings"):
        raise TypeError(f"target must be a checkpoint path or a loaded HF model, got {type(target).__name__}")
    return target.config.get_text_config() if hasattr(target.config, "get_text_config") \
        else target.config, {EMBED: target.get_input_embeddings().weight}


def _target_parts(target):
    """(config, input embedding weight) of a target given as a path or a loaded model."""
    cfg, emb = target_embedding(target)
    return cfg, emb.get(EMBED)


def load_drafter(path, target=None, *, dtype=None, device=None,
                 feedback: str = FEEDBACK_SERVING) -> Eagle3Drafter:
    """Load a drafter in any format, strictly. `target` (path or model) supplies `embed_tokens`
    when the checkpoint has none and is checked against the drafter. dtype and device: asked for
    (`dtype=`, `device=`), else those of a *loaded* target model (so the drafter takes the
    target's captured states as they come: an fp32 target gets an fp32 drafter even from a bf16
    file), else the checkpoint's dtype (that of `fc.weight`; other floating tensors are cast to
    it) on the CPU, memory-mapped where nothing is cast (a target given as a path is never
    loaded, so it decides nothing). `feedback` is the state fed back across draft steps
    (model/drafter.py: "serving" as SGLang/vLLM, or "pre-norm" as SpecForge trains). Known-harmless
    extras (frozen-target buffers, optimizer leftovers) are dropped with a CheckpointWarning
    naming them. Raises CheckpointError listing every problem."""
    if isinstance(target, torch.nn.Module):       # follow the loaded target, unless asked
        w = target.get_input_embeddings().weight
        dtype = dtype or (w.dtype if w.is_floating_point() else None)
        device = device or w.device
    model = load_with_report(path, target, dtype, device)[0]
    model.set_feedback(feedback)
    return model


def load_with_report(path, target, dtype, device) -> tuple[Eagle3Drafter, Report, torch.Tensor | None]:
    tcfg, temb = _target_parts(target)
    rep, state = inspect_checkpoint(path, tcfg)
    check_finite_streamed(state, rep)   # every value, in bounded chunks read from the file
    if "embed_tokens.weight" not in state:
        if temb is None:
            rep.problem("embed-missing", f"{path}: checkpoint has no embed_tokens.weight; pass "
                        f"target= (a path or model) to take it from the target")
        elif tuple(temb.shape) != (rep.config.vocab_size, rep.config.hidden_size):
            rep.problem("embed-shape", f"target embedding {tuple(temb.shape)} != (vocab_size, "
                        f"hidden_size) = ({rep.config.vocab_size}, {rep.config.hidden_size})")
        else:
            state["embed_tokens.weight"] = temb.detach().to("cpu")
    if not rep.ok:
        raise CheckpointError(f"cannot load drafter {path} (format {rep.format}):\n  - "
                              + "\n  - ".join(rep.problems))
    for f in rep.findings:
        if f.code == "ignored-keys":
            warnings.warn(f.message, CheckpointWarning, stacklevel=3)
    return _build(rep.config, state, dtype, device), rep, temb


def complete_vocab_buffers(cfg: DrafterConfig, state: dict) -> None:
    Vd, V = cfg.draft_vocab_size, cfg.vocab_size
    if "d2t" not in state:
        state["d2t"] = torch.zeros(Vd, dtype=torch.long)
    if "t2d" not in state:
        t2d = torch.zeros(V, dtype=torch.bool)
        t2d[torch.arange(Vd) + state["d2t"].long()] = True
        state["t2d"] = t2d


def _build(cfg: DrafterConfig, state: dict, dtype, device) -> Eagle3Drafter:
    complete_vocab_buffers(cfg, state)
    with torch.device("meta"):
        model = Eagle3Drafter(cfg)
    dtype = dtype or state["fc.weight"].dtype           # the file's: `.to` then copies nothing
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
