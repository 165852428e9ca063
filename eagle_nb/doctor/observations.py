"""Several observations of one served pair (the same drafter on the same engine, e.g. logs at batch
size 1 and 16): do they agree? At T = 0 acceptance cannot depend on the batch (each request's drafts
are checked against its own greedy argmax), so observations whose tau differ beyond their spread
name the engine (its batched kernels, its scheduler), not the drafter: a drafter cannot accept
more for one batch size than for another. The spread allowed between two observations is twice the
standard error of their difference (each observation's `tau_se`, over its pooled lines or
requests), and never less than the greedy tolerance measured between vLLM and the reference loop
(`engines.comparison.GREEDY_TAU_TOL`). Knows observations; runs nothing.
"""
from __future__ import annotations

import math

from eagle_nb.doctor.diagnosis import Check
from eagle_nb.engines.comparison import GREEDY_TAU_TOL

CHECK_ID = "observations"


def agreement(observations: list) -> Check | None:
    """'pass' when every pair of observations agrees within its spread, 'warn' naming the pair
    furthest apart when one does not; None for fewer than two."""
    if len(observations) < 2:
        return None
    rows = [f"{o.source}: tau {o.tau:.3f} ± {o.tau_se:.3f}" for o in observations]
    worst, apart = 0.0, None
    for i, a in enumerate(observations):
        for b in observations[i + 1:]:
            tol = max(GREEDY_TAU_TOL, 2 * math.hypot(a.tau_se, b.tau_se))
            excess = abs(a.tau - b.tau) / tol
            if excess > 1 and excess > worst:
                worst, apart = excess, (a, b, tol)
    if apart is None:
        return Check(CHECK_ID, "pass", "observations agree", "; ".join(rows))
    a, b, tol = apart
    return Check(CHECK_ID, "warn", "observations agree",
                 f"tau {a.tau:.3f} ({a.source}) and {b.tau:.3f} ({b.source}) differ by "
                 f"{abs(a.tau - b.tau):.3f}, beyond {tol:.3f}; all: " + "; ".join(rows),
                 [], "compare the engine at batch size 1 against the kit (`eagle-nb engine compare "
                     "--concurrency 1`), then at the batch size that accepts less; report it to the "
                     "engine with both logs")
