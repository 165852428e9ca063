"""Speculation profiles from what engines report, as pure functions of the parsed payloads (dicts
and numbers), so the engine code that fetches them only has to call one function:

- vLLM (0.32) per-request metrics, served with `--per-request-spec-decode-metrics summary|detailed`:
  each completion's `metrics.speculative_decoding` object (`RequestSpecDecodeMetrics.to_dict`,
  `vllm/v1/metrics/stats.py`): `acceptance_histogram` (steps by accepted drafts j = 0..k, bonus
  excluded), `num_spec_tokens` (k), `mean_acceptance_length` (1 + accepted / steps),
  `num_spec_steps`, `num_accepted_draft_tokens`, and at `detailed` `per_step_accepted`. Offline
  `LLM.generate` gives the same dict as `output.outputs[0].spec_decode_metrics.to_dict()`.
- Prometheus counters, vLLM's `vllm:spec_decode_*` and llama-server's `llamacpp:spec_decode_*`
  (engines/metrics.py reads both): drafts (verify steps) and accepted tokens per position; for a
  chain they fix the accepted-count histogram.
- llama-server's per-step log lines (`LLAMA_TRACE`, engines/llama_cpp.py `step_counts`):
  (accepted, drafted) per verify step.

Each refuses a payload that lacks what it needs, naming the field and the flag that adds it.
Knows payload shapes (docs/profile.md); nothing about processes or HTTP.
"""
from __future__ import annotations

from eagle_nb.profiles.profile import ProfileError, SpeculationProfile, dense_counts

VLLM_FIELD = "metrics.speculative_decoding"
VLLM_FLAG = "--per-request-spec-decode-metrics summary (or detailed)"


def vllm_request_metrics(response: dict, where: str = "response") -> dict:
    """The `speculative_decoding` object of one vLLM response (a completion or chat response, or
    the object itself), checked."""
    if not isinstance(response, dict):
        raise ProfileError(f"{where}: expected a JSON object, got {type(response).__name__}")
    if "acceptance_histogram" in response:
        spec = response
    else:
        spec = (response.get("metrics") or {}).get("speculative_decoding")
        if spec is None:
            raise ProfileError(
                f"{where}: no per-request speculative metrics ({VLLM_FIELD} is missing): start vLLM "
                f"with {VLLM_FLAG} and send one sequence per request (n = 1; vLLM omits them "
                "otherwise)")
    for name in ("acceptance_histogram", "num_spec_tokens"):
        if name not in spec:
            raise ProfileError(f"{where}: {VLLM_FIELD}.{name} is missing")
    return spec


def profile_from_vllm(responses, conditions: dict | None = None, **kw) -> SpeculationProfile:
    """One profile pooled over vLLM responses (`vllm_request_metrics` each): the histograms add up,
    the per-request mean is each request's `mean_acceptance_length` averaged. Requests that ran no
    verify step (one token long) count toward neither."""
    return vllm_profile_and_taus(responses, conditions, **kw)[0]


def vllm_profile_and_taus(responses, conditions: dict | None = None,
                          **kw) -> tuple[SpeculationProfile, list[float]]:
    """`profile_from_vllm`'s profile and each request's mean acceptance length (1 + accepted /
    steps of its own histogram, vLLM's `mean_acceptance_length`), in order, requests that ran no
    verify step left out."""
    specs = [vllm_request_metrics(r, f"response {i}") for i, r in enumerate(responses)]
    if not specs:
        raise ProfileError("no vLLM responses given")
    ks = sorted({s["num_spec_tokens"] for s in specs})
    if len(ks) != 1:
        raise ProfileError(f"{VLLM_FIELD}.num_spec_tokens differs between responses ({ks}): pool "
                           "requests of one num_speculative_tokens")
    k = ks[0]
    total = [0] * (k + 1)
    per_request = []
    for i, s in enumerate(specs):
        counts = dense_counts(s["acceptance_histogram"], k,
                              f"response {i}: {VLLM_FIELD}.acceptance_histogram")
        total = [a + b for a, b in zip(total, counts)]
        if sum(counts):
            per_request.append(1 + sum(m * c for m, c in enumerate(counts)) / sum(counts))
    conditions = {"engine": "vllm", "source": "per-request metrics", "requests": len(specs),
                  **(conditions or {})}
    return SpeculationProfile.from_histogram(total, k, per_request=per_request,
                                             conditions=conditions, **kw), per_request


def histogram_from_counters(num_drafts: float, accepted_per_pos, num_accepted: float | None = None,
                            engine: str = "vllm") -> list[int]:
    """A chain's accepted-count histogram (m = 0..k) from an engine's counters (a delta over the
    run): steps accepting exactly m = steps accepting position m-1 minus those accepting m."""
    n = int(round(num_drafts))
    if n <= 0:
        raise ProfileError(f"{engine} counters: num_drafts is {num_drafts}: the engine ran no verify "
                           "step (speculation off, or nothing decoded)")
    if not accepted_per_pos:
        raise ProfileError(f"{engine} counters: num_accepted_tokens_per_pos is missing or empty: "
                           "per-position counters are needed for per-position rates")
    reach = [n] + [int(round(x)) for x in accepted_per_pos] + [0]
    counts = [reach[m] - reach[m + 1] for m in range(len(accepted_per_pos) + 1)]
    if any(c < 0 for c in counts) or (num_accepted is not None
                                      and sum(reach[1:]) != int(round(num_accepted))):
        raise ProfileError(f"{engine} counters are not a chain's: drafts {num_drafts}, accepted "
                           f"{num_accepted}, per position {list(accepted_per_pos)}")
    return counts


def profile_from_counters(num_drafts: float, accepted_per_pos, num_accepted: float | None = None,
                          engine: str = "vllm", conditions: dict | None = None,
                          **kw) -> SpeculationProfile:
    """A profile from counters (`histogram_from_counters`); no per-request mean (counters pool)."""
    counts = histogram_from_counters(num_drafts, accepted_per_pos, num_accepted, engine)
    return SpeculationProfile.from_histogram(
        counts, len(counts) - 1,
        conditions={"engine": engine, "source": "/metrics counters", **(conditions or {})}, **kw)


def profile_from_llama_steps(steps, conditions: dict | None = None, **kw) -> SpeculationProfile:
    """A profile from llama-server's per-step (accepted, drafted) pairs (LLAMA_TRACE log lines).
    k is the most drafted in one step; steps that drafted fewer (end of a request) count as
    they were accepted."""
    steps = list(steps)
    if not steps:
        raise ProfileError("llama.cpp log: no 'accepted N/M draft tokens' lines: run llama-server "
                           "with the environment variable LLAMA_TRACE=1, or read its /metrics "
                           "counters (profile_from_counters)")
    k = max(d for _, d in steps)
    if k < 1:
        raise ProfileError("llama.cpp log: every step drafted 0 tokens")
    counts = [0] * (k + 1)
    for a, d in steps:
        if not 0 <= a <= d:
            raise ProfileError(f"llama.cpp log: a step accepted {a} of {d} drafted tokens")
        counts[a] += 1
    return SpeculationProfile.from_histogram(
        counts, k, conditions={"engine": "llama.cpp", "source": "LLAMA_TRACE step lines",
                               "short_drafts": sum(d < k for _, d in steps), **(conditions or {})},
        **kw)
