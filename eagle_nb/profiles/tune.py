"""Which draft length pays at each batch size: expected throughput per draft length k from a
profile's marginal rates and the step costs (docs/profile.md, "The tune model").

    tokens per step(k)  = 1 + marginal[0] + ... + marginal[k-1]      (accepted drafts + the bonus)
    time per step(b, k) = k * t_draft(b) + t_verify(b, k)
    throughput(b, k)    = b * tokens per step(k) / time per step(b, k)
    speedup(b, k)       = throughput(b, k) / (b / t_verify(b, 0))    (over target-only decoding)

Acceptance is taken per request, the same at every batch size; the batch changes only the costs.
Costs at a batch size other than the one the profile was measured at (its
`measurement_conditions.batch_size`, when it says) carry the acceptance over: an extrapolation,
warned by name (`UnmeasuredBatchSizeWarning`).
The break-even acceptance of k is the constant per-position acceptance alpha (marginal[i] =
alpha^(i+1), Leviathan et al.'s model: tokens per step = (1 - alpha^(k+1)) / (1 - alpha)) at
which speedup(b, k) = 1; the profile's own `equivalent_alpha` at k is the alpha that gives its
tokens per step, so speculation at k pays exactly when it exceeds the break-even.
Pure arithmetic: knows nothing about models or engines (the engines' flags for the best k come in
as a function, `engines.knobs.draft_flags` / `flags_line`, from their registry entries).
"""
from __future__ import annotations

import warnings
from typing import Callable, NamedTuple, Sequence

from eagle_nb.io.step_costs import StepCosts
from eagle_nb.profiles.profile import ProfileError, is_finite_rate, tokens_per_step


class UnmeasuredBatchSizeWarning(UserWarning):
    """Step costs at a batch size the profile's acceptance was not measured at: the tune model
    takes the measured acceptance as the same there (extrapolated)."""


class TuneRow(NamedTuple):
    batch_size: int
    k: int
    tokens_per_step: float
    step_time: float
    throughput: float             # tokens per unit time, the whole batch
    speedup: float                # over target-only decoding at this batch size
    break_even_alpha: float | None   # None: no acceptance pays at this k and batch size
    equivalent_alpha: float       # the profile's tokens per step as a constant alpha


class Tuned(NamedTuple):
    rows: list[TuneRow]
    best: dict[int, int]          # batch size -> best draft length (0: speculation does not pay)
    unit: str

    def at(self, batch_size: int) -> list[TuneRow]:
        return [r for r in self.rows if r.batch_size == batch_size]

    def as_dict(self, flags: Callable[[int], dict] | None = None) -> dict:
        """JSON-ready: every row, and the best k per batch size, with `flags(k)` (the engines'
        flags for it) when given."""
        return {"unit": self.unit, "rows": [r._asdict() for r in self.rows],
                "best": {str(b): {"k": k, **({"flags": flags(k)} if flags else {})}
                         for b, k in self.best.items()}}


def constant_alpha_tokens(alpha: float, k: int) -> float:
    """Tokens per step at draft length k when every position is accepted with probability alpha
    given the earlier ones: 1 + alpha + ... + alpha^k."""
    return sum(alpha ** i for i in range(k + 1))


def solve_alpha(tokens: float, k: int) -> float | None:
    """The alpha in [0, 1] with constant_alpha_tokens(alpha, k) = tokens; None above k + 1."""
    if tokens > k + 1 + 1e-12:
        return None
    if tokens <= 1:
        return 0.0
    lo, hi = 0.0, 1.0
    for _ in range(60):                      # monotone in alpha: bisection to ~1e-18
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if constant_alpha_tokens(mid, k) < tokens else (lo, mid)
    return (lo + hi) / 2


def break_even_alpha(costs: StepCosts, k: int) -> float | None:
    """The constant acceptance at which drafting k tokens at this batch size is as fast as not
    drafting; None when even accepting every draft does not pay."""
    needed = (k * costs.t_draft + costs.verify_at(k)) / costs.t_target
    return solve_alpha(needed, k)


def tune(marginal: Sequence[float], costs: Sequence[StepCosts], ks: Sequence[int] | None = None,
         measured_batch_size: int | None = None) -> Tuned:
    """Every (batch size, k) row and the best k per batch size; k runs over 1..len(marginal) by
    default (a profile says nothing past the depth it was measured at). With the batch size the
    profile was measured at, costs at any other warn (`UnmeasuredBatchSizeWarning`)."""
    check_marginal(marginal)
    if not costs:
        raise ProfileError("no step costs given: t_draft and t_verify for at least one batch size")
    other = sorted({c.batch_size for c in costs} - {measured_batch_size})
    if measured_batch_size is not None and other:
        warnings.warn(UnmeasuredBatchSizeWarning(
            f"the profile's acceptance was measured at batch size {measured_batch_size} "
            f"(measurement_conditions.batch_size); step costs at batch size "
            f"{', '.join(map(str, other))} take it as the same there (extrapolated: measure the "
            "profile at that batch size to know)"), stacklevel=2)
    ks = list(ks) if ks is not None else list(range(1, len(marginal) + 1))
    if not ks or min(ks) < 1:
        raise ProfileError(f"draft lengths must be >= 1, got {ks}")
    units = {c.unit for c in costs}
    rows, best = [], {}
    for c in costs:
        base = c.batch_size / c.t_target
        for k in ks:
            tokens = tokens_per_step(marginal, k)
            t = k * c.t_draft + c.verify_at(k)
            tp = c.batch_size * tokens / t
            rows.append(TuneRow(c.batch_size, k, tokens, t, tp, tp / base, break_even_alpha(c, k),
                                solve_alpha(tokens, k)))
        top = max((r for r in rows if r.batch_size == c.batch_size), key=lambda r: r.throughput)
        best[c.batch_size] = top.k if top.speedup > 1 else 0
    return Tuned(rows, best, units.pop() if len(units) == 1 else "mixed units")


def check_marginal(marginal: Sequence[float]) -> None:
    """The marginal rates the model reads: at least one, probabilities, non-increasing."""
    if isinstance(marginal, (str, bytes)) or not isinstance(marginal, Sequence) or not marginal:
        raise ProfileError(f"marginal_accept_rates: expected a non-empty list of rates, got {marginal!r}")
    bad = [(i, x) for i, x in enumerate(marginal) if not is_finite_rate(x)]
    if bad:
        raise ProfileError(f"marginal_accept_rates[{bad[0][0]}] = {bad[0][1]!r} is not a probability")
    up = [i for i in range(1, len(marginal)) if marginal[i] > marginal[i - 1] + 1e-9]
    if up:
        raise ProfileError(f"marginal_accept_rates increase at position {up[0]} "
                           f"({marginal[up[0] - 1]} -> {marginal[up[0]]}): not a chain's marginal "
                           "rates (conditional ones under the marginal name?)")


def report_lines(t: Tuned, flags_line: Callable[[int], str] | None = None) -> list[str]:
    """A table per batch size, then the best k (with `flags_line(k)`, the engines' flags, when
    given)."""
    out = []
    for b in sorted(t.best):
        out.append(f"batch size {b}  (times in {t.unit})")
        out.append("   k  tokens/step  step time  throughput  speedup  break-even alpha  "
                   "profile alpha")
        for r in t.at(b):
            be = "-" if r.break_even_alpha is None else f"{r.break_even_alpha:.3f}"
            mark = "  <- best" if r.k == t.best[b] else ""
            out.append(f"  {r.k:2d}  {r.tokens_per_step:11.3f}  {r.step_time:9.4g}  "
                       f"{r.throughput:10.4g}  {r.speedup:6.3f}x  {be:>16}  "
                       f"{r.equivalent_alpha:13.3f}{mark}")
        k = t.best[b]
        if flags_line is not None:
            out.append(f"  best: {flags_line(k)}")
        else:
            out.append(f"  best: k = {k}" if k else "  best: no speculation")
    return out
