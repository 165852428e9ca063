"""Tests for eagle_nb.loop.metrics: every acceptance metric on hand-made accepted-count lists, checked
against its engine's or paper's definition (docs/metrics.md).

No models: the input is a list of per-verify-step accepted counts (0..k) of a depth-k chain.
"""
from __future__ import annotations

import random

import pytest

from eagle_nb.loop import metrics as M
from eagle_nb.loop.metrics import (AcceptanceMetrics, acceptance_metrics, from_stats,
                              sglang_log_line, sglang_spec_accept_length, vllm_log_line)
from eagle_nb.loop.chain import SpecStats, VerifyStep

K = 4
COUNTS = [0, 4, 2, 2, 1, 0, 4, 3]     # 8 verify steps of a depth-4 chain, 16 drafts accepted


def stats_of(counts, depth):
    """A SpecStats holding only the accept counts (draft/target tokens are placeholders)."""
    steps = [VerifyStep(a, [0] * depth, [0] * (depth + 1)) for a in counts]
    return SpecStats(depth=depth, temperature=0.0, prompt_len=3, steps=steps)


def test_accept_length_is_one_plus_mean_accepted():
    """tau = 1 + accepted / verify steps (bonus included); gpt-fast's Mean Accepted excludes it."""
    m = acceptance_metrics(COUNTS, K)
    assert m.verify_steps == 8 and m.accepted == 16 and m.drafted == 32
    assert m.accept_length == pytest.approx(1 + 16 / 8) == 3.0
    assert sglang_log_line(m).startswith("accept len: 3.00,")


def test_vllm_per_position_rates_are_unconditional_and_non_increasing():
    """vLLM: position i counts a cycle that accepted positions 0..i (a >= i+1), over all cycles;
    so the rates never increase and 1 + their sum is tau (vLLM's chain identity)."""
    m = acceptance_metrics(COUNTS, K)
    # a >= 1: 6 of 8; a >= 2: 5; a >= 3: 3; a >= 4: 2
    assert m.per_position_acceptance == pytest.approx([6 / 8, 5 / 8, 3 / 8, 2 / 8])
    rng = random.Random(0)
    for _ in range(50):
        counts = [rng.randint(0, K) for _ in range(rng.randint(1, 30))]
        rates = acceptance_metrics(counts, K).per_position_acceptance
        assert all(a >= b for a, b in zip(rates, rates[1:]))
        assert 1 + sum(rates) == pytest.approx(acceptance_metrics(counts, K).accept_length)


def test_draft_acceptance_rate_is_accepted_over_drafted():
    """vLLM 'Avg Draft acceptance rate' = accepted / (verify steps * k) = (tau - 1) / k, which is
    also SGLang's post-#23530 rate; it is not the conditional alpha."""
    m = acceptance_metrics(COUNTS, K)
    assert m.draft_acceptance_rate == pytest.approx(16 / 32)
    assert m.draft_acceptance_rate == pytest.approx((m.accept_length - 1) / K)
    assert sglang_log_line(m, "by_drafts") == "accept len: 3.00, accept rate: 0.50"
    assert m.draft_acceptance_rate != pytest.approx(m.conditional_alpha[0])


def test_conditional_alpha_is_reach_over_tried_and_none_when_never_tried():
    """EAGLE n-alpha: P(accept position i | positions 0..i-1 accepted) = #(a > i) / #(a >= i);
    None (not 0, not a division error) when no cycle got as far as position i."""
    m = acceptance_metrics(COUNTS, K)
    # tried: a>=0: 8, a>=1: 6, a>=2: 5, a>=3: 3 ; reached: 6, 5, 3, 2
    assert m.conditional_alpha == pytest.approx([6 / 8, 5 / 6, 3 / 5, 2 / 3])
    dead = acceptance_metrics([0, 0, 1, 0], K)
    assert dead.conditional_alpha[0] == pytest.approx(1 / 4)
    assert dead.conditional_alpha[1] == 0.0          # one cycle tried position 1 and failed
    assert dead.conditional_alpha[2:] == [None, None]
    assert acceptance_metrics([0, 0], K).conditional_alpha == [0.0, None, None, None]
    assert acceptance_metrics([K, K], K).conditional_alpha == [1.0] * K


def test_histogram_counts_every_cycle_once_and_sums_to_one():
    """gpt-fast 'Acceptance probs': fraction of cycles accepting exactly m = 0..k drafts."""
    m = acceptance_metrics(COUNTS, K)
    assert m.accept_counts == [2, 1, 2, 1, 2]
    assert m.accept_histogram == pytest.approx([c / 8 for c in m.accept_counts])
    assert sum(m.accept_histogram) == pytest.approx(1.0)
    assert len(m.accept_histogram) == K + 1


def test_sglang_worked_example_dead_drafter():
    """One accepted draft in 20 cycles at k=4 (5 draft tokens): accept len 1.05; the pre-#23530
    rate accept_len/num_draft_tokens prints 0.21 (floor 0.20 at zero acceptance); the newer
    accepted/proposed rate is 0.0125."""
    counts = [1] + [0] * 19
    m = acceptance_metrics(counts, K)
    assert m.accept_length - 1 == pytest.approx(0.05)        # gpt-fast Mean Accepted
    assert sglang_log_line(m, "by_draft_tokens") == "accept len: 1.05, accept rate: 0.21"
    assert m.sglang_accept_rate_by_draft_tokens == pytest.approx(1.05 / 5)
    assert m.draft_acceptance_rate == pytest.approx(0.0125)
    assert sglang_log_line(m) == "accept len: 1.05, accept rate: 0.01"     # current default
    assert sglang_log_line(m, label=True).endswith("[SGLang >= 0.5.11 (PR #23530): accepted "
                                                   "drafts / proposed drafts]")
    assert "SGLang <= 0.5.10" in sglang_log_line(m, "by_draft_tokens", label=True)
    zero = acceptance_metrics([0] * 20, K)
    assert sglang_log_line(zero, "by_draft_tokens") == "accept len: 1.00, accept rate: 0.20"
    assert sglang_log_line(zero) == "accept len: 1.00, accept rate: 0.00"
    with pytest.raises(ValueError, match="unknown SGLang accept-rate formula"):
        sglang_log_line(m, "by_tokens")


def test_sglang_spec_accept_length_counts_the_prefill_token():
    """SGLang's per-request spec_accept_length = completion tokens / verify steps: a request of 20
    verify steps accepting 1 draft in all produced 1 (prefill) + 20 + 1 = 22 tokens -> 1.10, not
    tau = 1.05; several requests are averaged per request, not pooled."""
    assert sglang_spec_accept_length(22, 20) == pytest.approx(1.10)
    m = acceptance_metrics([1] + [0] * 19, K, completions=[(22, 20)])
    assert m.sglang_spec_accept_length == pytest.approx(1.10)
    assert m.accept_length == pytest.approx(1.05)
    two = acceptance_metrics([4, 4, 0, 0, 0, 0], K, completions=[(11, 2), (5, 4)])
    assert two.sglang_spec_accept_length == pytest.approx((5.5 + 1.25) / 2)
    assert acceptance_metrics([0], K).sglang_spec_accept_length is None
    with pytest.raises(ValueError, match="verify_steps"):
        sglang_spec_accept_length(3, 0)


def test_vllm_log_line_carries_the_per_position_rates():
    """The vLLM-style line shows mean acceptance length, accepted/drafted counts, every
    per-position rate and the draft acceptance rate in percent."""
    line = vllm_log_line(acceptance_metrics(COUNTS, K))
    assert "Mean acceptance length: 3.00" in line
    assert "Accepted: 16 tokens, Drafted: 32 tokens" in line
    assert "Per-position acceptance rate: 0.750, 0.625, 0.375, 0.250" in line
    assert "Avg Draft acceptance rate: 50.0%" in line


def test_invalid_counts_are_refused():
    """No verify steps, a negative count or one above k is an error, not a silent number."""
    with pytest.raises(ValueError, match="no verify steps"):
        acceptance_metrics([], K)
    with pytest.raises(ValueError, match="outside 0..4"):
        acceptance_metrics([0, 5], K)
    with pytest.raises(ValueError, match="outside 0..4"):
        acceptance_metrics([-1, 2], K)


def test_from_stats_pools_requests_and_refuses_mixed_depths():
    """from_stats pools the accept counts of several same-depth traces (as the engines pool
    requests), and refuses traces of different depths or no traces at all."""
    pooled = from_stats([stats_of(COUNTS[:3], K), stats_of(COUNTS[3:], K)])
    assert pooled == acceptance_metrics(COUNTS, K)
    assert pooled.sglang_spec_accept_length is None        # traces carry no tokens
    a, b = stats_of([4, 0], K), stats_of([1], K)
    a.tokens, b.tokens = [0] * (1 + 5 + 1), [0] * (1 + 2)   # prefill token + (accepted + 1) each
    assert from_stats([a, b]).sglang_spec_accept_length == pytest.approx((7 / 2 + 3 / 1) / 2)
    with pytest.raises(ValueError, match="different depths"):
        from_stats([stats_of([1, 2], 4), stats_of([1], 3)])
    with pytest.raises(ValueError):
        from_stats([])


def test_one_table_documents_every_metric_and_drives_every_view():
    """as_dict() round-trips every field; METRICS has one row (label, definition, source) per
    field except the depth, and the summary dict, table column and text report are built from it,
    with no alias fields (an engine's other name for a number lives in the source column)."""
    import dataclasses
    import json
    m = acceptance_metrics(COUNTS, K)
    d = m.as_dict()
    assert AcceptanceMetrics(**d) == m
    names = [x.name for x in M.METRICS]
    assert sorted(names) == sorted(f.name for f in dataclasses.fields(AcceptanceMetrics)
                                   if f.name != "depth")
    assert all(x.label and x.definition and x.source for x in M.METRICS)
    s = M.summary(m)
    assert json.loads(json.dumps(s))["accept_length"] == m.accept_length
    assert [k for k in s if k in names] == names
    col = M.table_column(m)
    assert [k for k in col][:len(names)] == [x.label for x in M.METRICS]
    assert col["vLLM avg draft acceptance rate"] == "50.0%"
    text = M.report_lines(m)
    assert text[0] == "tau: accept length (1 + accepted/steps): 3.0"
    assert any("gpt-fast 'Mean Accepted' is tau - 1" in x.source for x in M.METRICS)
    with pytest.raises(ValueError, match="formula"):
        sglang_log_line(m, "by_tokens")
