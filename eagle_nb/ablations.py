"""Named faults from real EAGLE-3 debugging stories, switched on deliberately (never by default).

Each ablation turns a healthy `Setup` into the broken one the story describes. The speculation
loop then measures what the fault does to acceptance. Knows the drafter and capture APIs; runs
no model itself.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from .capture import engine_style_layers
from .drafter import FC_ENGINE_WIDTH_CHECK
from .speculate import FEATURES_AUX, FEATURES_FINAL

ABLATIONS = {
    "fc-bypass": "the target hands over its single final (post-norm) hidden state instead of the "
                 "three aux layers; the engine's width check then skips fc (SGLang PR #13904)",
    "wrapper-capture": "the target is a multimodal wrapper; capture code that looks for "
                       "`model.layers` finds nothing and the final hidden state is handed over",
    "layer-ids+1": "aux layer ids shifted one boundary later (output-of-layer ids read as HF ids)",
    "layer-ids-1": "aux layer ids shifted one boundary earlier (HF ids read as output-of-layer ids)",
    "d2t-absolute": "d2t offsets used as absolute target ids (equivalently: 'fixed' by "
                    "subtracting arange), so draft id i becomes target id d2t[i]",
    "layers0-keys-dropped": "a speculators checkpoint (`layers.0.*`) loaded by a `midlayer.*` "
                            "engine-style non-strict loader (SGLang <= 0.5.11; 0.5.12+ loads "
                            "`layers.0.*`): the decoder layer stays random",
}


@dataclass
class Setup:
    target: object
    drafter: object
    layer_ids: list[int]
    feature_mode: str = FEATURES_AUX
    notes: list[str] = field(default_factory=list)


def _with_d2t(drafter, d2t):
    """A shallow copy sharing all weights, with its own d2t buffer (the original is untouched)."""
    d = copy.copy(drafter)
    d._buffers = dict(drafter._buffers)
    d._buffers["d2t"] = d2t
    return d


def apply(setup: Setup, names, *, speculators_path=None, target_path=None) -> Setup:
    """Return a new Setup with the named ablations applied (in the given order)."""
    s = replace(setup, notes=list(setup.notes))
    for name in names or ():
        if name not in ABLATIONS:
            raise ValueError(f"unknown ablation {name!r}; known: {sorted(ABLATIONS)}")
        if name == "fc-bypass":
            s.feature_mode = FEATURES_FINAL
            s.drafter = copy.copy(s.drafter)
            s.drafter.fc_policy = FC_ENGINE_WIDTH_CHECK
        elif name == "wrapper-capture":
            from .targets import make_wrapper
            s.target = make_wrapper(s.target)
            if engine_style_layers(s.target) is None:   # what the engine's capture code sees
                s.feature_mode = FEATURES_FINAL
                s.drafter = copy.copy(s.drafter)
                s.drafter.fc_policy = FC_ENGINE_WIDTH_CHECK
                s.notes.append("engine-style capture found no `model.layers` on "
                               f"{type(s.target).__name__}: final hidden state handed over")
        elif name in ("layer-ids+1", "layer-ids-1"):
            shift = 1 if name.endswith("+1") else -1
            s.layer_ids = [i + shift for i in s.layer_ids]
        elif name == "d2t-absolute":
            import torch
            d2t = s.drafter.d2t
            s.drafter = _with_d2t(s.drafter, d2t - torch.arange(d2t.numel(), device=d2t.device))
        elif name == "layers0-keys-dropped":
            from .checkpoints import load_drafter_engine_style
            if speculators_path is None:
                raise ValueError("layers0-keys-dropped needs a speculators-format checkpoint path")
            d, info = load_drafter_engine_style(speculators_path, s.target if target_path is None
                                                else target_path)
            s.drafter = d.to(s.drafter.fc.weight.device, s.drafter.fc.weight.dtype)
            s.notes.append(f"engine-style load dropped {len(info['dropped'])} keys and left "
                           f"{len(info['left_random'])} parameters at random init")
        s.notes.append(f"{name}: {ABLATIONS[name]}")
    return s
