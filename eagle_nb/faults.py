"""Named faults from real EAGLE-3 debugging stories, switched on deliberately (never by default).

A fault is one `Fault` entry in `FAULTS`: its name, the story, a public reference, what it
changes, and `apply`, a pure function `Wiring -> Wiring`. `Wiring` is everything the speculation
loop is given: which target object, which drafter object, the captured layer ids, which features
the target hands over (aux | final-hidden), the fc policy and the d2t table in use. The healthy
wiring comes from the pair; faults transform it in registry order; `speculate.generate` receives
its fields as explicit arguments. No module is copied or mutated.

Costly objects a fault needs (the multimodal wrapper, the engine-style non-strict drafter) come
from `Builds`, which builds each once per pair and hands the same object back afterwards.

How to add a fault (this module only):
  1. write `def _my_fault(w: Wiring, b: Builds) -> Wiring` that returns `w.but(...)` with the
     fields it changes, plus `note=` text for anything the run should report; if it needs a costly
     object, get it with `b.get("my-object", lambda: build_it(b.target, b.drafter))` (memoised);
  2. add `Fault("my-fault", story, reference, changes, _my_fault)` to `FAULTS`, at the place in
     the list where it must be applied (loader faults replace the drafter first, then what the
     target hands over, then layer ids);
  3. run `tests/test_faults.py`: every registered fault is exercised there by name.
A fault that needs something the loop is not yet given (a field not in `Wiring`) also needs that
field here and an argument in `speculate.generate`.

Knows the drafter and capture APIs and the checkpoint loaders; runs no model itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from .capture import engine_style_layers
from .drafter import FC_ENGINE_WIDTH_CHECK, FC_STRICT
from .speculate import FEATURES_AUX, FEATURES_FINAL


@dataclass(frozen=True)
class Wiring:
    """What the speculation loop is given. Frozen: a fault returns a new one (`but`)."""
    target: object
    drafter: object
    layer_ids: tuple[int, ...]        # HF hidden_states ids captured from the target
    features: str = FEATURES_AUX      # what the target hands over: aux | final-hidden
    fc_policy: str = FC_STRICT        # strict, or the engines' width check
    d2t: torch.Tensor | None = None   # the d2t in use; None = the drafter's own
    notes: tuple[str, ...] = ()

    def but(self, note: str | None = None, **changes) -> "Wiring":
        notes = self.notes + ((note,) if note else ())
        return replace(self, notes=notes, **changes)

    def d2t_in_use(self) -> torch.Tensor:
        return self.drafter.d2t if self.d2t is None else self.d2t

    def describe(self) -> dict:
        """The plain-data part (what a RunResult records)."""
        return {"layer_ids_hf": list(self.layer_ids), "feature_mode": self.features,
                "fc_policy": self.fc_policy,
                "d2t": "drafter's own" if self.d2t is None else "replaced by a fault"}


class Builds:
    """Costly objects faults need, built once per pair on first use and reused."""

    def __init__(self, target, drafter, speculators_path=None):
        self.target, self.drafter, self.speculators_path = target, drafter, speculators_path
        self._made: dict = {}

    def get(self, name: str, build: Callable[[], object]):
        if name not in self._made:
            self._made[name] = build()
        return self._made[name]


@dataclass(frozen=True)
class Fault:
    name: str
    story: str                 # what goes wrong, as a user meets it
    reference: str             # where it is documented publicly
    changes: str               # which Wiring fields it changes
    apply: Callable[[Wiring, Builds], Wiring] = field(repr=False)


# -- the transformations ---------------------------------------------------------------------------
def _engine_drafter(w: Wiring, b: Builds) -> Wiring:
    if b.speculators_path is None:
        raise ValueError("layers0-keys-dropped needs a speculators-format checkpoint path")

    def build():
        from .checkpoints import load_drafter_engine_style
        d, info = load_drafter_engine_style(b.speculators_path, b.target)
        return d.to(b.drafter.fc.weight.device, b.drafter.fc.weight.dtype), info

    d, info = b.get("engine-style-drafter", build)
    return w.but(drafter=d, d2t=None,
                 note=f"engine-style load dropped {len(info['dropped'])} keys and left "
                      f"{len(info['left_random'])} parameters at random init")


def _d2t_absolute(w: Wiring, b: Builds) -> Wiring:
    d2t = w.d2t_in_use()
    return w.but(d2t=d2t - torch.arange(d2t.numel(), device=d2t.device))


def _final_hidden(w: Wiring, b: Builds) -> Wiring:
    return w.but(features=FEATURES_FINAL, fc_policy=FC_ENGINE_WIDTH_CHECK)


def _wrapper(w: Wiring, b: Builds) -> Wiring:
    from .targets import make_wrapper
    wrapped = b.get("wrapper", lambda: make_wrapper(b.target))
    w = w.but(target=wrapped)
    if engine_style_layers(wrapped) is None:        # what the engine's capture code sees
        w = _final_hidden(w, b).but(
            note=f"engine-style capture found no `model.layers` on {type(wrapped).__name__}: "
                 "final hidden state handed over")
    return w


def _shift(by: int):
    def apply(w: Wiring, b: Builds) -> Wiring:
        return w.but(layer_ids=tuple(i + by for i in w.layer_ids))
    return apply


# -- the registry, in application order ------------------------------------------------------------
FAULTS: tuple[Fault, ...] = (
    Fault("layers0-keys-dropped",
          "a speculators checkpoint (`layers.0.*`) loaded by a `midlayer.*` engine-style "
          "non-strict loader: the decoder layer stays random",
          "reference/eagle3.md §2.3-2.4 (format C keys; how the engines load them)",
          "drafter, d2t",
          _engine_drafter),
    Fault("d2t-absolute",
          "d2t offsets used as absolute target ids (equivalently: 'fixed' by subtracting "
          "arange), so draft id i becomes target id d2t[i]",
          "reference/eagle3.md §3 and §7 #10 (verl-SpeCo PR #67)", "d2t",
          _d2t_absolute),
    Fault("wrapper-capture",
          "the target is a multimodal wrapper; capture code that looks for `model.layers` "
          "finds nothing and the final hidden state is handed over",
          "reference/eagle3.md §7 #1 (sglang PR #13904: VL wrapper lost aux states)",
          "target, features, fc_policy", _wrapper),
    Fault("fc-bypass",
          "the target hands over its single final (post-norm) hidden state instead of the three "
          "aux layers; the engine's width check then skips fc (SGLang PR #13904)",
          "reference/eagle3.md §1.4 and §7 #1 (sglang PR #13904)", "features, fc_policy",
          _final_hidden),
    Fault("layer-ids+1",
          "aux layer ids shifted one boundary later (output-of-layer ids read as HF ids)",
          "reference/eagle3.md §4 and §7 #2, #4 (sglang PR #25454, vllm PR #43671)",
          "layer_ids", _shift(1)),
    Fault("layer-ids-1",
          "aux layer ids shifted one boundary earlier (HF ids read as output-of-layer ids)",
          "reference/eagle3.md §4 and §7 #4 (vllm PR #43671)", "layer_ids", _shift(-1)),
)
BY_NAME = {f.name: f for f in FAULTS}
ORDER = {f.name: i for i, f in enumerate(FAULTS)}
STORIES = {f.name: f.story for f in FAULTS}

# The switches a panel offers as checkboxes, and the layer-id shift as its own control.
TOGGLES = ("layers0-keys-dropped", "d2t-absolute", "wrapper-capture", "fc-bypass")
SHIFTS = {-1: "layer-ids-1", 0: None, 1: "layer-ids+1"}
HEALTHY = "healthy"


def check(names) -> tuple[str, ...]:
    """Validated fault names in application (registry) order; unknown or repeated names fail."""
    names = tuple(names or ())
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {[f.name for f in FAULTS]}")
    if len(set(names)) != len(names):
        raise ValueError(f"fault listed twice in {list(names)}")
    return tuple(sorted(names, key=ORDER.__getitem__))


def ablations_for(faults=(), layer_shift: int = 0) -> tuple[str, ...]:
    """The fault names for a set of toggled faults and a captured-layer-id shift, in order."""
    if layer_shift not in SHIFTS:
        raise ValueError(f"layer_shift must be one of {sorted(SHIFTS)}, got {layer_shift}")
    return check(tuple(faults) + ((SHIFTS[layer_shift],) if SHIFTS[layer_shift] else ()))


def label(names) -> str:
    return " + ".join(names) if names else HEALTHY


def apply(wiring: Wiring, names, builds: Builds) -> Wiring:
    """The wiring with the named faults applied in registry order, each noted with its story."""
    for name in check(names):
        wiring = BY_NAME[name].apply(wiring, builds).but(note=f"{name}: {BY_NAME[name].story}")
    return wiring
