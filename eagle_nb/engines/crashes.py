"""Faults that only crash: the exact error text each engine prints, reproduced for a given pair, and
recognised in an engine log.

The crash-only faults are entries of the fault registry (`experiment.faults`, kind `crash`): each
carries its engine, the regex that finds it in a log line and the function that writes its text
(`experiment.fault_fns`; where torch produces the message, torch's own). This module only reads
those entries. Knows nothing about models beyond shapes.
"""
from __future__ import annotations

import re

from eagle_nb.experiment import faults as F


def crash_faults() -> dict:
    """name -> registry entry, for every crash-only fault (registry order)."""
    return {f.name: f for f in F.of_kind(F.CRASH)}


def reproduce(name: str, **shapes) -> str:
    """The error text the engine prints for this fault with the given shapes (keyword arguments:
    tokens, fc_in, hidden, n_states, target_hidden, target_class, draft_vocab, distinct_tokens).
    For 'fc-width-mismatch', `n_states` captured states of width `target_hidden` meet an fc
    expecting `fc_in` inputs."""
    crashes = crash_faults()
    if name not in crashes:
        raise ValueError(f"unknown crash fault {name!r}; known: {sorted(crashes)}")
    return crashes[name].crash.text(**shapes)


def recognise(text: str) -> list[tuple[str, str]]:
    """(crash fault name, the log line) for every line that carries a known engine error."""
    found, crashes = [], crash_faults().values()
    for line in text.splitlines():
        for c in crashes:
            if re.search(c.crash.pattern, line):
                found.append((c.name, line.strip()))
                break
    return found
