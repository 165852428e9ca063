"""Serving conditions run on a pair: the healthy pair and each named condition of the registry
(conditions/registry.py) at every depth, over the same prompts, with what each cost in seconds,
and the conditions that cannot run on this pair left out with why (notebook 07).

A condition that cannot run here raises `ConditionError` (a template mode the tokenizer cannot
render, a quantization the target does not allow); one whose run leaves nothing to measure (every
reply ended at once) raises a ValueError from the metrics. Both are recorded, never raised, so one
condition never stops the others; the healthy pair's errors propagate. Greedy chains over depths
come from one pass (`Pair.run`), so the seconds are those of a condition's one pass at all depths.
Knows `Pair.run` and the registry; nothing about plotting.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import pandas as pd

from eagle_nb.conditions import registry as C
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.experiment.results import Sweep
from eagle_nb.experiment.setting import Setting


@dataclass
class ConditionSweep:
    sweep: Sweep                                   # healthy and every condition that ran, each depth
    not_applicable: dict = field(default_factory=dict)   # {condition: why it did not run here}
    seconds: dict = field(default_factory=dict)    # {name: wall seconds of its runs, all depths}

    @property
    def names(self) -> list[str]:
        """Healthy, then the conditions that ran, in the order asked."""
        return list(dict.fromkeys(r.label for r in self.sweep))

    def at(self, depth: int, temperature: float = 0.0) -> dict:
        """{label: RunResult} at one depth (healthy first)."""
        return self.sweep.by_label(depth, temperature)

    def taus(self, depth: int, temperature: float = 0.0) -> dict:
        return {n: r.metrics.accept_length for n, r in self.at(depth, temperature).items()}

    def frame(self, depth: int, temperature: float = 0.0) -> pd.DataFrame:
        """One row per name asked: family, τ and its change from healthy, per-position acceptance
        (vLLM's unconditional rate), seconds, and why a condition did not run."""
        at, rows = self.at(depth, temperature), []
        base = at[HEALTHY].metrics.accept_length
        for name in [*self.names, *self.not_applicable]:
            r = at.get(name)
            rows.append({"condition": name,
                         "family": "" if name == HEALTHY else C.entry(name).family,
                         "tau": None if r is None else round(r.metrics.accept_length, 3),
                         "vs healthy": None if r is None else round(r.metrics.accept_length - base, 3),
                         "per-position": "" if r is None else
                         " / ".join(f"{x:.2f}" for x in r.metrics.per_position_acceptance),
                         "seconds": round(self.seconds.get(name, 0.0), 1),
                         "note": f"not applicable: {self.not_applicable[name]}"
                         if name in self.not_applicable else ""})
        return pd.DataFrame(rows).set_index("condition")


def condition_sweep(pair, prompts, conditions, depths=(4,), *, temperature: float = 0.0,
                    max_new_tokens: int = 32, seed: int = 0) -> ConditionSweep:
    """The healthy pair and each of `conditions` (registry names) at every depth of `depths`."""
    results, why, seconds = [], {}, {}
    for name in [HEALTHY, *conditions]:
        conds = () if name == HEALTHY else (C.entry(name).name,)
        t0 = time.perf_counter()
        try:
            runs = [pair.run(prompts, Setting(conditions=conds, depth=k, temperature=temperature,
                                              max_new_tokens=max_new_tokens, seed=seed), progress=False)
                    for k in depths]
        except ValueError as e:          # a ConditionError is one; so is nothing to measure
            if name == HEALTHY:
                raise
            why[name] = str(e).splitlines()[0]
            continue
        finally:
            seconds[name] = time.perf_counter() - t0
        results += runs
    return ConditionSweep(Sweep(results), why, seconds)
