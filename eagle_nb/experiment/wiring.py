"""What the speculation loop is given, as one frozen value a fault transforms: `Wiring`.

`Wiring` holds which target object, which drafter object, the captured layer ids, which features
the target hands over (aux | final-hidden), the fc policy, the d2t table in use, how prompts are
wrapped and the template mode they are rendered in. The healthy wiring comes from the pair
(pair.py); each switchable fault of the registry (faults.py) and each serving condition
(conditions/registry.py) returns a new one with `but(...)`; `loop.chain.generate` receives its fields as explicit
arguments. `Builds` memoises the costly objects a fault needs (the multimodal wrapper, the
engine-style drafter), once per pair.

Knows the loop's feature modes and the drafter's fc policies; runs no model and imports no torch
(the CLI checks fault names through the registry before torch loads).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from eagle_nb.model.config import FC_STRICT, FEATURES_AUX

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Wiring:
    """What the speculation loop is given. Frozen: a fault returns a new one (`but`)."""
    target: object
    drafter: object
    layer_ids: tuple[int, ...]        # HF hidden_states ids captured from the target
    features: str = FEATURES_AUX      # what the target hands over: aux | final-hidden
    fc_policy: str = FC_STRICT        # strict, or the engines' width check
    d2t: torch.Tensor | None = None   # the d2t in use; None = the drafter's own
    prompt_format: str = "{prompt}"   # how a prompt's text is wrapped before tokenising
    template: str | None = None       # a template mode (conditions/templates.py); None: as given
    notes: tuple[str, ...] = ()

    def but(self, note: str | None = None, **changes) -> "Wiring":
        notes = self.notes + ((note,) if note else ())
        return replace(self, notes=notes, **changes)

    def served(self, prompt):
        """The prompt as the loop tokenises it: unchanged, or with its text (a chat's last user turn)
        wrapped by `prompt_format`."""
        if self.prompt_format == "{prompt}":
            return prompt
        if hasattr(prompt, "messages"):
            *head, (role, text) = prompt.messages
            return type(prompt)((*head, (role, self.prompt_format.format(prompt=text))))
        return self.prompt_format.format(prompt=str(prompt))

    def d2t_in_use(self) -> torch.Tensor:
        return self.drafter.d2t if self.d2t is None else self.d2t

    def describe(self) -> dict:
        """The plain-data part (what a RunResult records)."""
        return {"layer_ids_hf": list(self.layer_ids), "feature_mode": self.features,
                "fc_policy": self.fc_policy,
                "d2t": "drafter's own" if self.d2t is None else "replaced by a fault",
                "prompt_format": self.prompt_format, "template": self.template or "as given"}


# The Wiring fields a fault may change (a registry entry's `changes` names some of them).
FIELDS = ("target", "drafter", "layer_ids", "features", "fc_policy", "d2t", "prompt_format", "template")


class Builds:
    """Costly objects faults need, built once per pair on first use and reused."""

    def __init__(self, target, drafter, speculators_path=None, num_layers: int | None = None,
                 tokenizer=None):
        # target: the loaded model, or (a recorded pair) its directory or None
        self.target, self.drafter, self.speculators_path = target, drafter, speculators_path
        self.tokenizer = tokenizer
        self.num_layers = num_layers
        self._made: dict = {}

    def get(self, name, build: Callable[[], object]):
        if name not in self._made:
            self._made[name] = build()
        return self._made[name]


class NotApplicable(ValueError):
    """The fault cannot happen on this pair (e.g. a flag it drops is not set)."""


class NeedsTarget(ValueError):
    """The fault (or setting) needs the loaded target; the pair has a recording of it."""
