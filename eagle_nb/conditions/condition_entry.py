"""What one serving condition is: a `Condition` entry of the registry (registry.py), holding every
fact about it, the way experiment/fault_entry.py holds a fault's.

A condition is not a fault in the drafter's files: the files are right, and acceptance falls (or
rises, misleadingly) because of how the pair is served: the template a request is rendered in, a
quantized target, a context longer than the drafter was trained on, a workload whose output loops,
a draft vocabulary that misses the workload's tokens. An entry says what happens (story), where it
is reported publicly (reference), what the user changes (fix), how the pair is run under it
(`apply`, a pure `(wiring, builds) -> wiring` from condition_fns.py, and the wiring fields it
changes), which function measures it (measure), what the doctor sees of it in a measured profile
(signature), and the check a user runs on their own pair (check).

Knows nothing about models: the functions an entry holds live in condition_fns.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

# what part of serving the condition is about (docs/conditions.md has a section per family)
TEMPLATE, PRECISION, CONTEXT, WORKLOAD, VOCABULARY = "template", "precision", "context", "workload", "vocabulary"
FAMILIES = (TEMPLATE, PRECISION, CONTEXT, WORKLOAD, VOCABULARY)
# the wiring fields a condition may change (experiment/wiring.py holds them)
CHANGEABLE = ("target", "drafter", "template", "prompt_format")


class ConditionError(ValueError):
    """The condition cannot be run on this pair (a template mode the tokenizer cannot render, a
    quantization its layers do not allow, a context the target does not have)."""


@dataclass(frozen=True)
class Condition:
    name: str
    family: str                # template | precision | context | workload | vocabulary
    story: str                 # what happens, as a user meets it
    reference: str             # where it is reported publicly
    fix: str                   # what the user changes
    apply: Callable = field(repr=False)     # (Wiring, Builds) -> Wiring: the pair run under it
    changes: str               # the Wiring fields `apply` changes, comma-separated
    measure: str               # the function(s) that measure it (names in eagle_nb)
    signature: str             # what a measured profile shows under it (the doctor's words)
    check: str                 # the command a user runs on their own pair

    def __post_init__(self):
        why = []
        if self.family not in FAMILIES:
            why.append(f"family {self.family!r} is not one of {FAMILIES}")
        if not all((self.name, self.story, self.reference, self.fix, self.measure, self.signature,
                    self.check)):
            why.append("name, story, reference, fix, measure, signature and check are required")
        if not callable(self.apply):
            why.append("apply must be a (wiring, builds) -> wiring function")
        bad = [c for c in self.fields_changed if c not in CHANGEABLE]
        if not self.fields_changed or bad:
            why.append(f"changes must name wiring fields among {CHANGEABLE}, got {self.changes!r}")
        if why:
            raise ValueError(f"condition {self.name!r}: " + "; ".join(why))

    @property
    def fields_changed(self) -> tuple[str, ...]:
        return tuple(c.strip() for c in self.changes.split(",") if c.strip())
