"""Reading `speculation_profile.json` back strictly: whoever wrote it (the kit, Model-Optimizer's
specdec_bench or ar_validate, a hand), a profile that a consumer would misread is refused with the
field named: a stub (`measured: false`), vectors withheld (block verification), a vector whose
length is not `num_speculative_tokens`, a rate outside [0, 1], increasing marginal rates (not a
survival function; vLLM's synthetic sampler refuses them too), conditional rates that are not the
ratios of the marginal ones, a histogram with no steps, a `measurement_conditions.batch_size` that
is not a positive integer. A mean acceptance length that disagrees
with 1 + sum(marginal) is kept (Model-Optimizer records it rather than raising) and reported by
`consistency_note`. Knows the schema (docs/profile.md); nothing about engines.
"""
from __future__ import annotations

from pathlib import Path

from eagle_nb.profiles.profile import (
    FILENAME,
    RATE_TOLERANCE,
    ProfileError,
    SpeculationProfile,
    check_rates,
    counts_from_lengths,
)


def parse_profile(d: dict, where: str = "profile") -> SpeculationProfile:
    """A `SpeculationProfile` from the schema's JSON object (see the module docstring)."""
    if not isinstance(d, dict):
        raise ProfileError(f"{where}: expected a JSON object, got {type(d).__name__}")
    version = str(d.get("schema_version", ""))
    if not version.startswith("1."):
        raise ProfileError(f"{where}: schema_version {d.get('schema_version')!r}; this kit reads "
                           "Model-Optimizer's speculation profile schema 1.x")
    if d.get("measured") is False:
        raise ProfileError(f"{where}: measured is false: a stub written before any measurement, "
                           "its rates mean nothing (measure one: eagle-nb profile)")
    k = d.get("num_speculative_tokens")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ProfileError(f"{where}: num_speculative_tokens must be a positive integer, got {k!r}")
    marginal = _rates(d, "marginal_accept_rates", k, where)
    conditional = _rates(d, "conditional_accept_rates", k, where)
    check_rates(k, conditional, marginal, where)
    marginal, conditional = [float(x) for x in marginal], [float(x) for x in conditional]
    for i in range(k):
        prev = marginal[i - 1] if i else 1.0
        if prev > 0 and abs(conditional[i] - marginal[i] / prev) > RATE_TOLERANCE:
            raise ProfileError(
                f"{where}: conditional_accept_rates[{i}] = {conditional[i]} is not "
                f"marginal[{i}] / marginal[{i - 1}] = {marginal[i] / prev:.6f}: the two vectors "
                "describe different measurements")
    mean = d.get("mean_accept_length")
    if not isinstance(mean, (int, float)) or isinstance(mean, bool) or not 1 <= mean <= k + 1:
        raise ProfileError(f"{where}: mean_accept_length must be a number in [1, {k + 1}] "
                           f"(num_speculative_tokens + 1), got {mean!r}")
    hist = d.get("acceptance_length_histogram")
    if hist is not None:
        if not isinstance(hist, dict):
            raise ProfileError(f"{where}: acceptance_length_histogram must be an object "
                               f"{{acceptance length: steps}}, got {type(hist).__name__}")
        counts = counts_from_lengths(hist, k)
        if not sum(counts):
            raise ProfileError(f"{where}: acceptance_length_histogram has no steps: nothing was "
                               "measured")
        hist = {str(m + 1): c for m, c in enumerate(counts)}
    per_req = d.get("mean_accept_length_per_request")
    conditions = d.get("measurement_conditions") or {}
    if not isinstance(conditions, dict):
        raise ProfileError(f"{where}: measurement_conditions must be an object, got "
                           f"{type(conditions).__name__}")
    b = conditions.get("batch_size")
    if b is not None and (not isinstance(b, int) or isinstance(b, bool) or b < 1):
        raise ProfileError(f"{where}: measurement_conditions.batch_size must be a positive integer "
                           f"(the batch the acceptance was measured at), got {b!r}")
    return SpeculationProfile(
        k, conditional, marginal, float(mean),
        float(per_req) if isinstance(per_req, (int, float)) and per_req else None, hist, conditions,
        method=d.get("method") or "unknown", draft_checkpoint=d.get("draft_checkpoint"),
        target_model=d.get("target_model"),
        verification_method=d.get("verification_method") or "longest_prefix",
        accept_length_model=d.get("accept_length_model") or "unknown",
        producer=d.get("producer") or "unknown")


def _rates(d: dict, name: str, k: int, where: str) -> list[float]:
    v = d.get(name)
    if v is None:
        why = d.get("vectors_unavailable_reason")
        raise ProfileError(f"{where}: {name} is missing"
                           + (f" ({why})" if why else "") + "; a profile without per-position rates "
                           "cannot drive an engine or tune (measure with longest-prefix verification)")
    if not isinstance(v, list):
        raise ProfileError(f"{where}: {name} must be a list, got {type(v).__name__}")
    return list(v)           # its length and values: check_rates


def read_profile(path) -> SpeculationProfile:
    """Read a `speculation_profile.json` (or the one inside a directory), strictly."""
    from eagle_nb.io.files import read_json_object
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    return parse_profile(read_json_object(path, "speculation profile"), str(path))


def consistency_note(p: SpeculationProfile) -> str | None:
    """A sentence when the mean acceptance length disagrees with 1 + sum(marginal) (the vectors
    were cut short of what was measured), else None."""
    c = p.validation()["mean_consistency"]
    if c["passed"]:
        return None
    return (f"mean_accept_length {c['reported_mean_accept_length']} but 1 + sum(marginal_accept_rates) "
            f"= {c['implied_mean_accept_length']} (off by {c['abs_delta']} > {c['tolerance']}): the "
            "rates may be truncated below the depth that was measured")
