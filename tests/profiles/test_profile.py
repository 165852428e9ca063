"""The speculation profile (eagle_nb/profiles/profile.py, profile_json.py): the one histogram -> rates
conversion in both conventions, pinned against hand counts, Model-Optimizer's own test cases
(docs/profile.md) and the kit's acceptance metrics; the schema's round trip; and every malformed
profile refused with its field named."""
from __future__ import annotations

import json

import pytest

from eagle_nb.loop.metrics import acceptance_metrics
from eagle_nb.profiles.profile import (
    ProfileError,
    SpeculationProfile,
    accept_rates,
    counts_from_lengths,
    length_histogram,
    tokens_per_step,
    write_profile,
)
from eagle_nb.profiles.profile_json import consistency_note, parse_profile, read_profile


def test_rates_by_hand():
    """100 steps accepting 0, 1, 2 drafts 40/30/30 times (k = 3): marginal P(>= i+1 accepted) =
    0.6, 0.3, 0; conditional 0.6, 0.3/0.6, 0 (never reached: 0, as Model-Optimizer writes it)."""
    r = accept_rates([40, 30, 30, 0], 3)
    assert r.marginal == pytest.approx([0.6, 0.3, 0.0])
    assert r.conditional == pytest.approx([0.6, 0.5, 0.0])
    assert r.steps == 100 and r.mean_accept_length == pytest.approx(1.9)


def test_mean_acceptance_length_counts_the_bonus_as_vllm_does():
    """Mean acceptance length = 1 + accepted / steps (vLLM's, the kit's tau) = 1 + sum(marginal),
    and each marginal rate is the kit's (vLLM's) per-position acceptance."""
    counts = [3, 0, 5, 1, 7]
    trace = [m for m, c in enumerate(counts) for _ in range(c)]
    m = acceptance_metrics(trace, 4)
    r = accept_rates(counts, 4)
    assert r.mean_accept_length == pytest.approx(m.accept_length)
    assert r.mean_accept_length == pytest.approx(1 + sum(r.marginal))
    assert r.marginal == pytest.approx(m.per_position_acceptance)
    assert r.conditional == pytest.approx([c for c in m.conditional_alpha])


def test_histogram_gap_keeps_the_survival_function():
    """No step accepted exactly 1 draft: P(>= 1) still equals P(>= 2) (a gap is not a zero),
    Model-Optimizer's gap case (lengths 1 and 3 only): marginal 0.5, 0.5, 0; mean 2.0."""
    for hist in ({0: 50, 2: 50}, [50, 0, 50, 0]):
        r = accept_rates(hist, 3)
        assert r.marginal == pytest.approx([0.5, 0.5, 0.0])
        assert r.conditional == pytest.approx([0.5, 1.0, 0.0])
        assert r.mean_accept_length == pytest.approx(2.0)


def test_model_optimizer_cases():
    """Model-Optimizer's test numbers (lengths {1: 8611, 2: 7814, 3: 5337, 4: 8891} -> per-step
    mean 2.4733) come out the same through the accepted-count convention."""
    lengths = {"1": 8611, "2": 7814, "3": 5337, "4": 8891}
    r = accept_rates(counts_from_lengths(lengths, 3), 3)
    assert r.mean_accept_length == pytest.approx(2.4733, abs=1e-3)
    assert all(a >= b for a, b in zip(r.marginal, r.marginal[1:]))


def test_lengths_and_counts_convert_both_ways():
    """The file keys steps by acceptance length (accepted + 1); reading it back gives the counts."""
    counts = [4, 0, 2, 9]
    assert length_histogram(counts) == {"1": 4, "2": 0, "3": 2, "4": 9}
    assert counts_from_lengths(length_histogram(counts), 3) == counts


@pytest.mark.parametrize("hist, k, field", [
    ([0, 0, 0], 2, "no verify steps"),
    ({}, 2, "no verify steps"),
    ([1, 2], 2, "needs 3"),
    ({5: 1}, 4, "outside 0..4"),
    ([1, -1, 0], 2, "non-negative integer"),
    ([1, 0.5, 0], 2, "non-negative integer"),
])
def test_bad_histograms_are_refused(hist, k, field):
    """A histogram with no steps, the wrong length for k, a count outside 0..k, a negative or
    fractional count: each an error that names the histogram."""
    with pytest.raises(ProfileError, match="histogram") as e:
        accept_rates(hist, k)
    assert field in str(e.value)


def test_tokens_per_step_refuses_depths_past_the_profile():
    assert tokens_per_step([0.8, 0.6], 1) == pytest.approx(1.8)
    with pytest.raises(ProfileError, match="num_speculative_tokens = 2"):
        tokens_per_step([0.8, 0.6], 3)


def _profile():
    return SpeculationProfile.from_histogram(
        [10, 20, 30, 40], 3, per_request=[2.5, 2.0],
        conditions={"depth": 3, "temperature": 0.0}, draft="/home/me/ckpts/org/drafter",
        target="org/target")


def test_json_round_trip(tmp_path):
    """Written and read back, a profile keeps its rates, means, histogram and conditions; paths
    are published as `org/model` ids; Model-Optimizer's validation block passes."""
    p = _profile()
    path = write_profile(p, tmp_path)
    assert path.name == "speculation_profile.json"
    d = json.loads(path.read_text())
    assert d["schema_version"] == "1.0" and d["measured"] is True
    assert d["draft_checkpoint"] == {"id": "org/drafter"}
    assert d["validation"]["mean_consistency"]["passed"]
    assert d["validation"]["marginal_monotonicity"]["passed"]
    q = read_profile(path)
    assert q.marginal_accept_rates == pytest.approx(p.marginal_accept_rates)
    assert q.conditional_accept_rates == pytest.approx(p.conditional_accept_rates)
    assert q.mean_accept_length == pytest.approx(p.mean_accept_length)
    assert q.mean_accept_length_per_request == pytest.approx(2.25)
    assert q.acceptance_length_histogram == p.acceptance_length_histogram
    assert q.measurement_conditions == {"depth": 3, "temperature": 0.0}
    assert consistency_note(q) is None


def _bad(**changes):
    d = _profile().to_json()
    d.update(changes)
    return d


@pytest.mark.parametrize("changes, field", [
    ({"marginal_accept_rates": [0.5, 0.7, 0.4]}, "marginal_accept_rates increase at position 1"),
    ({"marginal_accept_rates": [0.9, 0.7]}, "marginal_accept_rates has 2 entries but "
                                            "num_speculative_tokens is 3"),
    ({"conditional_accept_rates": [0.9, 0.7, 0.4, 0.1]}, "conditional_accept_rates has 4"),
    ({"num_speculative_tokens": 4}, "has 3 entries but num_speculative_tokens is 4"),
    ({"marginal_accept_rates": [1.2, 0.7, 0.4]}, r"marginal_accept_rates\[0\] = 1.2 is not a probability"),
    ({"marginal_accept_rates": [float("nan"), 0.7, 0.4]}, "not a probability"),
    ({"conditional_accept_rates": [0.9, 0.9, 0.9]}, r"conditional_accept_rates\[1\] = 0.9 is not"),
    ({"acceptance_length_histogram": {"1": 0, "2": 0}}, "acceptance_length_histogram has no steps"),
    ({"acceptance_length_histogram": {"9": 3}}, "acceptance_length_histogram: steps accepting 8"),
    ({"measured": False}, "measured is false"),
    ({"marginal_accept_rates": None, "vectors_unavailable_reason": "block verification"},
     r"marginal_accept_rates is missing \(block verification\)"),
    ({"schema_version": "2.0"}, "schema_version"),
    ({"mean_accept_length": 7.0}, r"mean_accept_length must be a number in \[1, 4\]"),
    ({"measurement_conditions": {"batch_size": "8"}},
     "measurement_conditions.batch_size must be a positive integer"),
])
def test_malformed_profiles_name_the_field(changes, field):
    """Increasing marginals, lengths that do not match num_speculative_tokens, non-probabilities,
    conditional rates that are not the marginals' ratios, an empty histogram, a stub, withheld
    vectors, an unknown schema: each refused, the field named."""
    with pytest.raises(ProfileError, match=field):
        parse_profile(_bad(**changes), "p.json")


@pytest.mark.parametrize("k, conditional, marginal, field", [
    (3, [0.9, 0.5, 0.4], [0.9, 0.45, 0.5], r"marginal_accept_rates increase at position 2"),
    (3, [0.9, 0.5], [0.9, 0.45], r"conditional_accept_rates has 2 entries but num_speculative_tokens is 3"),
    (2, [0.9, 0.5], [0.9, 0.45, 0.2], r"marginal_accept_rates has 3 entries but num_speculative_tokens is 2"),
    (2, [0.9, 0.5], [0.9, -0.1], r"marginal_accept_rates\[1\] = -0.1 is not a probability"),
    (0, [], [], "num_speculative_tokens must be a positive integer"),
])
def test_a_profile_value_is_checked_when_built(k, conditional, marginal, field):
    """Built in Python (not read from a file), a profile with increasing marginal rates, rates
    whose length differs from num_speculative_tokens, or a non-probability is refused too, the
    field named: every consumer (knobs, tune) then reads rates it can trust."""
    with pytest.raises(ProfileError, match=field):
        SpeculationProfile(k, conditional, marginal, 1 + sum(marginal))


def test_truncated_vectors_are_reported_not_refused():
    """A mean above 1 + sum(marginal) (vectors cut short of the measured depth) is read, with a
    note (Model-Optimizer records the check rather than raising)."""
    d = _bad(mean_accept_length=3.5, acceptance_length_histogram=None)
    p = parse_profile(d)
    assert "truncated" in consistency_note(p)
