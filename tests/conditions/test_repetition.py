"""Tests for eagle_nb.conditions.repetition: which tokens are in a loop (hand-made sequences), the loop
share per prompt and pooled, which verify step drafts from where, and tau split by loop-free steps.
"""
from __future__ import annotations

import pytest

from eagle_nb.loop.chain import SpecStats, VerifyStep
from eagle_nb.loop.metrics import from_stats
from eagle_nb.conditions.repetition import drafted_from, in_loop_mask, loop_report, loop_share


def test_a_token_is_in_a_loop_when_it_ends_an_ngram_seen_before():
    """n = 3 on 'a b c a b c a x': the first repeat of (a b c) ends at index 5, then (b c a) at 6;
    index 7 ends (c a x), new. Nothing before index n-1 can be in a loop."""
    seq = list("abcabcax")
    assert in_loop_mask(seq, 3) == [False] * 5 + [True, True, False]
    assert loop_share(seq, 3) == 2 / 8


def test_overlapping_repeats_count():
    """A run of one token: with n = 6, the 7th copy ends the second (overlapping) 6-gram, so a run
    of 10 has 4 tokens in a loop; in a 2-token cycle 'x y x y ...' of 12 tokens every token from
    index 7 on (the 6-gram ending at 5 recurs at 7) is in a loop."""
    assert in_loop_mask([7] * 10) == [False] * 6 + [True] * 4
    xy = [1, 2] * 6
    assert in_loop_mask(xy) == [False] * 7 + [True] * 5


def test_no_repeat_no_loop_and_short_continuations():
    """Distinct tokens, a continuation shorter than n, and an empty one."""
    assert not any(in_loop_mask(range(50)))
    assert in_loop_mask([1, 1, 1], 6) == [False] * 3
    assert loop_share([]) is None
    assert loop_share([5, 5], 1) == 0.5          # n = 1: a token seen before
    with pytest.raises(ValueError, match="n must be"):
        in_loop_mask([1], 0)


def test_steps_draft_from_the_last_committed_token():
    """The first step drafts from index 0 (the prefill token); each step then moves by accepted + 1."""
    assert drafted_from([0, 2, 1, 0]) == [0, 1, 4, 6]
    assert drafted_from([]) == []


def _stats(tokens, counts, depth=3):
    """A SpecStats whose steps commit `counts` (tokens: prefill token + each step's a + 1)."""
    steps = [VerifyStep(a, [0] * depth, [0] * (depth + 1)) for a in counts]
    return SpecStats(depth, 0.0, 1, tokens=list(tokens), steps=steps)


def test_loop_report_splits_tau_by_where_a_step_drafts_from():
    """Prompt 1 is loop-free (tokens 0..9), steps accept 1, 1, 2, 1 (drafting from 0, 2, 4, 7);
    prompt 2 is 'u v' repeated with n = 2: indices 3.. are in a loop; its steps accept 0 from
    index 0 (not in a loop) and 3, 3 from indices 1 (no) and 5 (yes). Shares, pooled share, tau
    overall (= the metrics' tau), on loop-free steps and in loops, by hand."""
    a = _stats(range(10), [1, 1, 2, 1])
    b = _stats([4, 5] * 5, [0, 3, 3])
    rep = loop_report([a, b], n=2)
    assert rep.per_prompt == [0.0, 7 / 10]
    assert rep.share == 7 / 20 and rep.tokens == 20 and rep.loop_tokens == 7
    assert drafted_from(b.accept_counts) == [0, 1, 5]
    assert rep.steps == 7 and rep.loop_free_steps == 6
    assert rep.tau == pytest.approx(from_stats([a, b]).accept_length) == pytest.approx(1 + 11 / 7)
    assert rep.tau_loop_free == pytest.approx(1 + 8 / 6)
    assert rep.tau_in_loop == pytest.approx(1 + 3 / 1)
    lines = rep.report_lines()
    assert "35.0% of 20 tokens (1 of 2 prompts loop)" in lines[0] and "6 of 7 steps" in lines[1]
    assert rep.as_dict()["tau_loop_free"] == rep.tau_loop_free


def test_loop_report_without_loops_or_steps():
    """No loops: tau_in_loop is None and tau_loop_free == tau; no steps at all is an error; steps
    that point past their tokens are an error naming it."""
    rep = loop_report([_stats(range(6), [1, 2])])
    assert rep.share == 0 and rep.tau_in_loop is None and rep.tau_loop_free == rep.tau
    with pytest.raises(ValueError, match="no verify steps"):
        loop_report([_stats([1], [])])
    with pytest.raises(ValueError, match="tokens and steps disagree"):
        loop_report([_stats([1, 2], [3, 0])])


def test_run_result_exposes_the_loop_report():
    """RunResult.loop_report(n) is loop_report over its stats."""
    from eagle_nb.experiment.results import RunResult
    from eagle_nb.experiment.setting import Setting
    st = _stats([4, 5] * 5, [0, 3, 3])
    res = RunResult(Setting(depth=3), ["p"], ["o"], [st], from_stats([st]))
    assert res.loop_report(2) == loop_report([st], 2)
