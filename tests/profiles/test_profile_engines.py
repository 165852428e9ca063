"""Profiles from engine payloads (eagle_nb/profiles/profile_engines.py): vLLM 0.32's per-request
`metrics.speculative_decoding` objects (the shape `RequestSpecDecodeMetrics.to_dict` writes),
Prometheus counters (vLLM, llama.cpp) and llama.cpp's per-step log lines give the same profile as
the kit computes from the same steps; payloads without what is needed are refused by name."""
from __future__ import annotations

import pytest

from eagle_nb.profiles.profile import ProfileError, accept_rates
from eagle_nb.profiles.profile_engines import (
    histogram_from_counters,
    profile_from_counters,
    profile_from_llama_steps,
    profile_from_vllm,
    vllm_request_metrics,
)


def vllm_payload(per_step: list[int], k: int, detailed: bool = True) -> dict:
    """What vLLM's `RequestSpecDecodeMetrics.to_dict` returns for these per-step accepted counts
    (vllm/v1/metrics/stats.py, 0.32), inside a completion response's `metrics`."""
    hist = [0] * (k + 1)
    for a in per_step:
        hist[a] += 1
    n, acc = len(per_step), sum(per_step)
    spec = {"mean_acceptance_length": 1.0 + acc / n if n else 1.0,
            "draft_acceptance_rate": acc / (n * k) if n else 0.0, "acceptance_histogram": hist,
            "num_spec_steps": n, "num_accepted_draft_tokens": acc, "num_draft_tokens": n * k,
            "num_spec_tokens": k}
    if detailed:
        spec.update(per_step_accepted=per_step, per_step_drafted=[k] * n)
    return {"id": "cmpl-1", "object": "text_completion", "choices": [{"text": "..."}],
            "metrics": {"speculative_decoding": spec}}


def test_vllm_responses_pool_into_one_profile():
    """Histograms add up across requests; the per-step mean is vLLM's mean acceptance length of
    the pooled steps, the per-request mean averages each response's own."""
    a, b = [3, 0, 1, 3], [0, 0]
    p = profile_from_vllm([vllm_payload(a, 3), vllm_payload(b, 3, detailed=False)])
    r = accept_rates([3, 1, 0, 2], 3)
    assert p.marginal_accept_rates == pytest.approx(r.marginal)
    assert p.conditional_accept_rates == pytest.approx(r.conditional)
    assert p.mean_accept_length == pytest.approx(1 + 7 / 6)
    assert p.mean_accept_length_per_request == pytest.approx(((1 + 7 / 4) + 1.0) / 2)
    assert p.measurement_conditions["engine"] == "vllm" and p.steps == 6


def test_vllm_bare_metrics_object_is_read_too():
    """The `speculative_decoding` object alone (offline `LLM.generate`'s `spec_decode_metrics.to_dict()`)."""
    spec = vllm_payload([1, 2], 2)["metrics"]["speculative_decoding"]
    assert vllm_request_metrics(spec) is spec


def test_vllm_response_without_per_request_metrics_names_the_field_and_flag():
    bare = {"id": "cmpl-1", "choices": [{"text": "x"}]}
    with pytest.raises(ProfileError, match=r"response 1: .*metrics\.speculative_decoding is missing.*"
                                           r"--per-request-spec-decode-metrics"):
        profile_from_vllm([vllm_payload([1], 2), bare])


def test_vllm_mixed_depths_and_bad_histograms_are_refused():
    with pytest.raises(ProfileError, match="num_spec_tokens differs"):
        profile_from_vllm([vllm_payload([1], 2), vllm_payload([1], 3)])
    bad = vllm_payload([1], 2)
    bad["metrics"]["speculative_decoding"]["acceptance_histogram"] = [0, 1]
    with pytest.raises(ProfileError, match="acceptance_histogram has 2 entries"):
        profile_from_vllm([bad])
    with pytest.raises(ProfileError, match="no verify steps"):
        profile_from_vllm([vllm_payload([], 2)])


def test_counters_fix_a_chains_histogram():
    """vLLM's / llama.cpp's counters (drafts, accepted per position) give the exact histogram."""
    steps = [0, 2, 2, 1, 3, 0, 3]
    n = len(steps)
    per_pos = [sum(a > i for a in steps) for i in range(3)]
    assert histogram_from_counters(n, per_pos, sum(steps)) == [2, 1, 2, 2]
    p = profile_from_counters(float(n), [float(x) for x in per_pos], float(sum(steps)),
                              engine="llama.cpp")
    assert p.marginal_accept_rates == pytest.approx([x / n for x in per_pos])
    assert p.measurement_conditions["engine"] == "llama.cpp"


def test_counters_that_are_not_a_chains_are_refused():
    with pytest.raises(ProfileError, match="num_drafts is 0"):
        histogram_from_counters(0, [0, 0])
    with pytest.raises(ProfileError, match="num_accepted_tokens_per_pos is missing"):
        histogram_from_counters(5, [])
    with pytest.raises(ProfileError, match="not a chain's"):
        histogram_from_counters(5, [2, 4])                 # position 1 accepted more than 0
    with pytest.raises(ProfileError, match="not a chain's"):
        histogram_from_counters(5, [4, 2], num_accepted=9)


def test_llama_step_lines():
    """(accepted, drafted) per step -> the profile; a short draft at a request's end counts as
    it was accepted; no step lines is an error naming LLAMA_TRACE."""
    p = profile_from_llama_steps([(2, 3), (0, 3), (3, 3), (1, 2)])
    assert p.num_speculative_tokens == 3
    assert p.marginal_accept_rates == pytest.approx([0.75, 0.5, 0.25])
    assert p.measurement_conditions["short_drafts"] == 1
    with pytest.raises(ProfileError, match="LLAMA_TRACE"):
        profile_from_llama_steps([])
