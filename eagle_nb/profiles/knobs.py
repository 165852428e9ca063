"""What a speculation profile gives an engine's synthetic-acceptance knob, at a draft length k: the
three quantities engines take (docs/profile.md cites their sources).

- `marginal_rates`: the **marginal** rates, one per draft position (k entries, each in [0, 1],
  non-increasing; vLLM's `synthetic_acceptance_rates`);
- `acceptance_length`: the mean acceptance length **with** the bonus token (SGLang's
  `SGLANG_SIMULATE_ACC_LEN`);
- `accepted_drafts`: accepted **drafts** per step, AL - 1 (TensorRT-LLM's forced count).

Which engine takes which, and how it is written, is the engine's registry entry (`knobs`,
`render_knobs`: engines/vllm.py, engines/sglang.py, engines/trtllm.py); `engines.knobs` looks them
up. Each refuses a depth past the profile's. Knows the profile; nothing about engines.
"""
from __future__ import annotations

from eagle_nb.profiles.profile import ProfileError, SpeculationProfile


def depth(p: SpeculationProfile, k: int | None) -> int:
    """k itself (the profile's depth when None), checked: a positive integer, never deeper than the
    profile was measured at."""
    k = p.num_speculative_tokens if k is None else k
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ProfileError(f"num_speculative_tokens must be a positive integer, got {k!r}")
    if k > p.num_speculative_tokens:
        raise ProfileError(f"num_speculative_tokens {k} is deeper than the profile's "
                           f"{p.num_speculative_tokens}: its rates say nothing about positions past "
                           f"{p.num_speculative_tokens} (measure at depth {k})")
    return k


def marginal_rates(p: SpeculationProfile, k: int | None = None) -> list[float]:
    """The first k marginal rates (6 decimals), checked non-increasing as vLLM checks them."""
    k = depth(p, k)
    rates = [round(x, 6) for x in p.marginal_accept_rates[:k]]
    if any(rates[i] > rates[i - 1] for i in range(1, k)):
        raise ProfileError(f"synthetic_acceptance_rates must be non-increasing, got {rates}")
    return rates


def acceptance_length(p: SpeculationProfile, k: int | None = None) -> float:
    """Mean tokens per verify step at depth k, the bonus token included."""
    return p.tokens_per_step(depth(p, k))


def accepted_drafts(p: SpeculationProfile, k: int | None = None) -> float:
    """Mean accepted drafts per verify step at depth k (AL - 1)."""
    return acceptance_length(p, k) - 1
