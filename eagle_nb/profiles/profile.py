"""A drafter's speculation profile: per-position acceptance in both conventions the consumers
want, with the mean acceptance length and the conditions it was measured under, written as
`speculation_profile.json` in NVIDIA Model-Optimizer's schema (docs/profile.md cites it).

- `accept_rates` is the one conversion from a histogram of verify steps by accepted drafts
  (m = 0..k, the bonus token excluded, as vLLM's `acceptance_histogram` and the kit's
  `accept_counts` count) to `conditional_accept_rates` (P(draft i+1 accepted | drafts 1..i
  accepted): Dynamo's simulator) and `marginal_accept_rates` (P(drafts 1..i+1 all accepted):
  vLLM's synthetic sampler). Both come from the survival function P(m > i), so a histogram gap (an
  m no step ended at) needs no special case, and mean acceptance length = 1 + sum(marginal) =
  1 + accepted / steps, vLLM's mean acceptance length (docs/metrics.md) exactly.
- `SpeculationProfile` is the value, checked when built (`check_rates`: one rate per position,
  probabilities, non-increasing marginals, each error naming the field); `to_json` /
  `write_profile` write the schema
  (`profile_json.read_profile` reads it back strictly, every error naming the field). The file's histogram is keyed by acceptance length (accepted + 1,
  tokens emitted per step), as Model-Optimizer's `AcceptanceRate` keys it.

Plain data and arithmetic: knows nothing about models, engines or plotting.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

SCHEMA_VERSION = "1.0"                  # Model-Optimizer speculation_profile.py SCHEMA_VERSION
FILENAME = "speculation_profile.json"
MEAN_TOLERANCE = 0.02                   # Model-Optimizer's mean-consistency tolerance
RATE_TOLERANCE = 1e-4                   # conditional vs marginal ratios (the file rounds to 6 digits)


class ProfileError(ValueError):
    """A profile or its source is malformed; the message names the field."""


class AcceptRates(NamedTuple):
    conditional: list[float]      # P(draft i+1 accepted | drafts 1..i accepted), i = 0..k-1
    marginal: list[float]         # P(drafts 1..i+1 all accepted), non-increasing
    mean_accept_length: float     # 1 + accepted / steps (bonus token included)
    steps: int                    # verify steps counted


def dense_counts(histogram, num_speculative_tokens: int, field_name: str = "histogram") -> list[int]:
    """Verify steps by accepted drafts m = 0..k as a dense list of k + 1 counts. `histogram` is a
    dense list (index m; it must hold exactly k + 1 entries) or a {m: steps} mapping (an absent m
    had no steps)."""
    k = num_speculative_tokens
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ProfileError(f"num_speculative_tokens must be a positive integer, got {k!r}")
    if isinstance(histogram, Mapping):
        counts = [0] * (k + 1)
        for m, c in histogram.items():
            try:
                m = int(m)
            except (TypeError, ValueError):
                raise ProfileError(f"{field_name}: key {m!r} is not an accepted-draft count") from None
            if not 0 <= m <= k:
                raise ProfileError(f"{field_name}: steps accepting {m} drafts, outside 0..{k} "
                                   f"(num_speculative_tokens = {k})")
            counts[m] += _count(c, f"{field_name}[{m}]")
        return counts
    if isinstance(histogram, (str, bytes)) or not isinstance(histogram, Sequence):
        raise ProfileError(f"{field_name}: expected a list or a mapping of step counts, "
                           f"got {type(histogram).__name__}")
    if len(histogram) != k + 1:
        raise ProfileError(f"{field_name} has {len(histogram)} entries; num_speculative_tokens = {k} "
                           f"needs {k + 1} (accepted drafts 0..{k})")
    return [_count(c, f"{field_name}[{m}]") for m, c in enumerate(histogram)]


def _count(c, where: str) -> int:
    if isinstance(c, bool) or not isinstance(c, (int, float)) or c < 0 or c != int(c):
        raise ProfileError(f"{where}: a step count must be a non-negative integer, got {c!r}")
    return int(c)


def accept_rates(histogram, num_speculative_tokens: int,
                 field_name: str = "acceptance_length_histogram") -> AcceptRates:
    """Both rate conventions and the mean acceptance length from the accepted-count histogram
    (`dense_counts` says which shapes it takes). Refuses a histogram with no steps."""
    counts = dense_counts(histogram, num_speculative_tokens, field_name)
    n = sum(counts)
    if n == 0:
        raise ProfileError(f"{field_name}: no verify steps; a profile needs at least one "
                           "speculative step (did the run decode anything?)")
    k = num_speculative_tokens
    reach = [sum(counts[i:]) for i in range(k + 2)]       # reach[i]: steps accepting >= i drafts
    marginal = [reach[i + 1] / n for i in range(k)]
    conditional = [reach[i + 1] / reach[i] if reach[i] else 0.0 for i in range(k)]
    mean = 1 + sum(m * c for m, c in enumerate(counts)) / n
    return AcceptRates(conditional, marginal, mean, n)


def length_histogram(counts: Sequence[int]) -> dict[str, int]:
    """The accepted-count histogram keyed as the file keys it: by acceptance length (accepted
    drafts + 1, tokens per step), string keys."""
    return {str(m + 1): int(c) for m, c in enumerate(counts)}


def counts_from_lengths(lengths: Mapping, num_speculative_tokens: int) -> list[int]:
    """The file's acceptance-length histogram back to accepted-count steps m = 0..k."""
    try:
        by_m = {int(length) - 1: c for length, c in lengths.items()}
    except (TypeError, ValueError):
        raise ProfileError(f"acceptance_length_histogram: keys must be acceptance lengths (integers "
                           f">= 1), got {sorted(map(str, lengths))[:5]}") from None
    return dense_counts(by_m, num_speculative_tokens, "acceptance_length_histogram")


def check_rates(k, conditional, marginal, where: str = "profile") -> None:
    """A value's rates as every consumer reads them: num_speculative_tokens a positive integer,
    one rate per draft position in each vector, each a probability, the marginal ones
    non-increasing (a survival function; vLLM's synthetic sampler refuses others too)."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ProfileError(f"{where}: num_speculative_tokens must be a positive integer, got {k!r}")
    for name, v in (("conditional_accept_rates", conditional), ("marginal_accept_rates", marginal)):
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise ProfileError(f"{where}: {name} must be a list, got {type(v).__name__}")
        if len(v) != k:
            raise ProfileError(f"{where}: {name} has {len(v)} entries but num_speculative_tokens "
                               f"is {k}; one rate per draft position")
        bad = [(i, x) for i, x in enumerate(v) if not is_finite_rate(x)]
        if bad:
            raise ProfileError(f"{where}: {name}[{bad[0][0]}] = {bad[0][1]!r} is not a probability "
                               "(a finite number in [0, 1])")
    for i in range(1, k):
        if marginal[i] > marginal[i - 1] + 1e-9:
            raise ProfileError(
                f"{where}: marginal_accept_rates increase at position {i} ({marginal[i - 1]} -> "
                f"{marginal[i]}): P(drafts 1..i+1 all accepted) cannot exceed P(drafts 1..i); "
                "were conditional rates written under the marginal name?")


def tokens_per_step(marginal: Sequence[float], k: int) -> float:
    """Expected tokens per verify step at draft length k: 1 + P(>= 1) + ... + P(>= k accepted)."""
    if k > len(marginal):
        raise ProfileError(f"draft length {k} is deeper than the profile's num_speculative_tokens = "
                           f"{len(marginal)}: measure the profile at depth >= {k}")
    return 1.0 + sum(marginal[:k])


def checkpoint_id(path) -> str | None:
    """A path reduced to its last two components (`org/model`), as Model-Optimizer publishes it."""
    parts = [p for p in str(path or "").replace("\\", "/").split("/") if p]
    return "/".join(parts[-2:]) or None


@dataclass
class SpeculationProfile:
    """One measurement of a chain drafter at depth `num_speculative_tokens` (see the module
    docstring). For a greedy chain the drafts at depth k are a prefix of those at K > k, so the
    first k marginal rates describe depth k too (`accept_length_model = chain_analytic`)."""
    num_speculative_tokens: int
    conditional_accept_rates: list[float]
    marginal_accept_rates: list[float]
    mean_accept_length: float                   # per step: 1 + accepted / steps
    mean_accept_length_per_request: float | None = None   # each request's AL, averaged
    acceptance_length_histogram: dict[str, int] | None = None   # tokens per step -> steps
    measurement_conditions: dict = field(default_factory=dict)
    method: str = "eagle3"
    draft_checkpoint: dict | None = None
    target_model: dict | None = None
    verification_method: str = "longest_prefix"
    accept_length_model: str = "chain_analytic"
    producer: str = "eagle_nb"

    def __post_init__(self):
        check_rates(self.num_speculative_tokens, self.conditional_accept_rates,
                    self.marginal_accept_rates)

    @classmethod
    def from_histogram(cls, histogram, num_speculative_tokens: int, *,
                       per_request: Sequence[float] | None = None, conditions: dict | None = None,
                       draft=None, target=None, **kw) -> "SpeculationProfile":
        """A measured profile from the pooled accepted-count histogram and, optionally, each
        request's mean acceptance length (`per_request`)."""
        counts = dense_counts(histogram, num_speculative_tokens, "acceptance_length_histogram")
        r = accept_rates(counts, num_speculative_tokens)
        per_req = list(per_request or [])
        return cls(num_speculative_tokens, r.conditional, r.marginal, r.mean_accept_length,
                   sum(per_req) / len(per_req) if per_req else None, length_histogram(counts),
                   dict(conditions or {}), draft_checkpoint=_model_ref(draft),
                   target_model=_model_ref(target), **kw)

    @property
    def steps(self) -> int | None:
        h = self.acceptance_length_histogram
        return None if h is None else sum(h.values())

    def tokens_per_step(self, k: int | None = None) -> float:
        """Expected tokens per step at draft length k <= num_speculative_tokens (default: all)."""
        return tokens_per_step(self.marginal_accept_rates, k or self.num_speculative_tokens)

    def validation(self) -> dict:
        """Model-Optimizer's two checks: the per-step mean against 1 + sum(marginal) (a truncated
        vector fails it) and the marginals' monotonicity (vLLM's synthetic sampler needs it)."""
        implied = 1.0 + sum(self.marginal_accept_rates)
        delta = abs(implied - self.mean_accept_length)
        m = self.marginal_accept_rates
        bad = [{"position": i, "value": m[i], "previous": m[i - 1]}
               for i in range(1, len(m)) if m[i] > m[i - 1] + 1e-9]
        return {"mean_consistency": {"implied_mean_accept_length": round(implied, 6),
                                     "reported_mean_accept_length": round(self.mean_accept_length, 6),
                                     "abs_delta": round(delta, 6), "tolerance": MEAN_TOLERANCE,
                                     "passed": delta <= MEAN_TOLERANCE},
                "marginal_monotonicity": {"passed": not bad, "violations": bad}}

    def to_json(self) -> dict:
        """The schema's fields, in Model-Optimizer's order (rates rounded to 6 digits as it does)."""
        k = self.num_speculative_tokens
        return {
            "schema_version": SCHEMA_VERSION, "measured": True, "producer": self.producer,
            "method": self.method, "draft_checkpoint": self.draft_checkpoint,
            "target_model": self.target_model, "num_speculative_tokens": k, "block_size": None,
            "max_supported_k": k, "verification_method": self.verification_method,
            "conditional_accept_rates": [round(x, 6) for x in self.conditional_accept_rates],
            "marginal_accept_rates": [round(x, 6) for x in self.marginal_accept_rates],
            "mean_accept_length": round(self.mean_accept_length, 6),
            "mean_accept_length_per_request": None if self.mean_accept_length_per_request is None
            else round(self.mean_accept_length_per_request, 6),
            "accept_length_model": self.accept_length_model,
            "accept_length_by_k": {str(k): round(self.mean_accept_length, 6)},
            "acceptance_length_histogram": self.acceptance_length_histogram, "per_category": None,
            "measurement_conditions": self.measurement_conditions,
            "validation": self.validation(),
        }


def _model_ref(x) -> dict | None:
    """What the schema's draft_checkpoint / target_model hold: the `org/model` id (never a full
    local path: the file is meant to travel with a checkpoint)."""
    if x is None or isinstance(x, dict):
        return x
    return {"id": checkpoint_id(x)}


def write_profile(profile: SpeculationProfile, path) -> Path:
    """Write `speculation_profile.json` (into `path` if it is a directory); returns the file."""
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    text = json.dumps(profile.to_json(), indent=2, allow_nan=False)
    path.write_text(text + "\n")
    return path


def is_finite_rate(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and 0 <= x <= 1


def report_lines(p: SpeculationProfile) -> list[str]:
    """The profile as text: both conventions named, the means, the histogram, the conditions."""
    def fmt(xs):
        return ", ".join(f"{x:.3f}" for x in xs)
    per_req = p.mean_accept_length_per_request
    lines = [f"num_speculative_tokens: {p.num_speculative_tokens} ({p.method}, {p.verification_method})",
             f"conditional_accept_rates (P(draft i+1 accepted | drafts 1..i accepted); Dynamo): "
             f"{fmt(p.conditional_accept_rates)}",
             f"marginal_accept_rates (P(drafts 1..i+1 all accepted); vLLM synthetic): "
             f"{fmt(p.marginal_accept_rates)}",
             f"mean_accept_length (per step, bonus included): {p.mean_accept_length:.3f}",
             f"mean_accept_length_per_request: {'-' if per_req is None else f'{per_req:.3f}'}"]
    if p.acceptance_length_histogram is not None:
        h = ", ".join(f"{k}: {v}" for k, v in p.acceptance_length_histogram.items())
        lines.append(f"acceptance_length_histogram (tokens per step: steps): {h}")
    lines += [f"measured: {k} = {json.dumps(v)}" for k, v in p.measurement_conditions.items()]
    return lines
