"""The tune model (eagle_nb/profiles/tune.py, docs/profile.md): tokens per step from the marginal rates,
time per step k * t_draft + t_verify, the best k per batch size and the break-even acceptance,
checked against the worked example of issue 31 (MakazhanAlpamys/Soup #843: a 1B draft for
Llama-3.1-8B, only 1.68x faster than the target; break-even 0.832 at k = 5 against 0.813 measured,
so the optimum is k = 1-2)."""
from __future__ import annotations

import pytest

from eagle_nb.io.step_costs import StepCosts, costs_from_numbers
from eagle_nb.profiles.profile import ProfileError
from eagle_nb.profiles.tune import (
    break_even_alpha,
    constant_alpha_tokens,
    report_lines,
    solve_alpha,
    tune,
)

RATIO = 1.68          # the draft step is 1 / 1.68 of a target step (Soup #843)
ALPHA = 0.81293       # measured per-token acceptance there (the unrounded 0.813)


def worked_example(k_max: int = 5):
    marginal = [ALPHA ** (i + 1) for i in range(k_max)]       # a constant-alpha chain
    costs = [costs_from_numbers(t_draft=1 / RATIO, t_verify=1.0)]
    return tune(marginal, costs)


def test_worked_example_break_even_at_k5():
    """Break-even acceptance at k = 5 is 0.832 (and 0.595 at k = 1: alpha = the cost ratio)."""
    c = costs_from_numbers(1 / RATIO, 1.0)
    assert round(break_even_alpha(c, 5), 3) == 0.832
    assert break_even_alpha(c, 1) == pytest.approx(1 / RATIO)


def test_worked_example_best_k_is_1_or_2():
    """At alpha 0.813 k = 5 loses (0.956x, below break-even), k = 1 and 2 win (1.14x, 1.13x);
    tune picks k = 1, and the profile's equivalent alpha is the measured one at every k."""
    t = worked_example()
    by_k = {r.k: r for r in t.at(1)}
    assert by_k[5].speedup == pytest.approx(0.956, abs=1e-3)
    assert by_k[5].equivalent_alpha < by_k[5].break_even_alpha
    assert by_k[1].speedup == pytest.approx(1.1365, abs=1e-3)
    assert by_k[2].speedup == pytest.approx(1.1293, abs=1e-3)
    assert t.best == {1: 1}
    assert all(r.equivalent_alpha == pytest.approx(ALPHA) for r in t.rows)


def test_throughput_model():
    """tokens/step = 1 + sum(marginal[:k]); step time = k t_draft + t_verify(k);
    throughput = b tokens / time; speedup against b / t_verify(0)."""
    costs = StepCosts(8, 0.5, {0: 2.0, 4: 3.0})
    t = tune([0.9, 0.7, 0.5, 0.2], [costs])
    r = {x.k: x for x in t.at(8)}
    assert r[2].tokens_per_step == pytest.approx(2.6)
    assert r[2].step_time == pytest.approx(2 * 0.5 + 2.5)            # t_verify interpolated
    assert r[2].throughput == pytest.approx(8 * 2.6 / 3.5)
    assert r[2].speedup == pytest.approx((8 * 2.6 / 3.5) / (8 / 2.0))
    assert t.best[8] == max(r, key=lambda k: r[k].throughput)


def test_speculation_that_never_pays_says_so():
    """A drafter as slow as the target: no alpha breaks even at k >= 1 except perfect; best 0."""
    t = tune([0.3, 0.1], [costs_from_numbers(1.0, 1.0)])
    assert t.best == {1: 0}
    assert break_even_alpha(costs_from_numbers(1.0, 1.0), 2) == pytest.approx(1.0, abs=1e-9)
    assert break_even_alpha(costs_from_numbers(2.0, 1.0), 2) is None       # needs 5 tokens of 3


def test_batch_sizes_can_disagree():
    """Verify cost growing with k at batch 64 (compute-bound) moves the best k down."""
    costs = [StepCosts(1, 0.1, {0: 1.0}), StepCosts(64, 0.1, {0: 1.0, 1: 1.6, 6: 4.0})]
    t = tune([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], costs)
    assert t.best[1] > t.best[64] >= 1


def test_alpha_solver_inverts_the_constant_alpha_model():
    for a in (0.0, 0.3, 0.813, 0.99):
        for k in (1, 3, 7):
            assert solve_alpha(constant_alpha_tokens(a, k), k) == pytest.approx(a, abs=1e-9)
    assert solve_alpha(5.0, 3) is None


def test_report_without_and_with_engine_flags():
    """The tune model knows no engine: without a flags function the best line is the bare k; the
    flags function (the registry's, engines.knobs) adds each engine's flags for it."""
    t = worked_example()
    text = "\n".join(report_lines(t))
    assert "<- best" in text and "0.832" in text and "  best: k = 1" in text
    assert "--speculative" not in text and "flags" not in t.as_dict()["best"]["1"]
    text = "\n".join(report_lines(t, lambda k: f"k = {k}; Engine --steps {k}"))
    assert "  best: k = 1; Engine --steps 1" in text
    assert t.as_dict(lambda k: {"e": k})["best"]["1"]["flags"] == {"e": 1}


def test_tune_refuses_depths_past_the_profile_and_no_costs():
    with pytest.raises(ProfileError, match="num_speculative_tokens = 2"):
        tune([0.8, 0.6], [costs_from_numbers(0.1, 1.0)], ks=[1, 2, 3])
    with pytest.raises(ProfileError, match="no step costs"):
        tune([0.8], [])


@pytest.mark.parametrize("marginal, msg", [
    ([0.5, 0.7], r"marginal_accept_rates increase at position 1 \(0.5 -> 0.7\)"),
    ([], "marginal_accept_rates: expected a non-empty list"),
    ([0.9, 1.5], r"marginal_accept_rates\[1\] = 1.5 is not a probability"),
])
def test_tune_refuses_marginal_rates_no_chain_has(marginal, msg):
    """Increasing marginal rates (conditional ones under the wrong name), none, or a rate above 1:
    refused with the field named, before any row is computed."""
    with pytest.raises(ProfileError, match=msg):
        tune(marginal, [costs_from_numbers(0.1, 1.0)])


def test_costs_at_a_batch_size_the_profile_was_not_measured_at_warn_by_name():
    """A profile measured at batch size 1 and costs at 1 and 8: the rows for 8 are computed with the
    same acceptance, and a named warning says it is an extrapolation, naming the sizes; costs at
    the measured size alone, or a profile that does not say, warn nothing."""
    import warnings

    from eagle_nb.profiles.tune import UnmeasuredBatchSizeWarning
    costs = [costs_from_numbers(0.1, 1.0), costs_from_numbers(0.1, 1.2, batch_size=8)]
    with pytest.warns(UnmeasuredBatchSizeWarning, match="measured at batch size 1.*batch size 8"):
        t = tune([0.8, 0.6], costs, measured_batch_size=1)
    assert sorted(t.best) == [1, 8]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tune([0.8, 0.6], costs[:1], measured_batch_size=1)
        tune([0.8, 0.6], costs)
