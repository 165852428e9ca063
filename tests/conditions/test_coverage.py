"""Tests for eagle_nb.conditions.coverage on hand-made vocabularies and continuations: the draft
vocabulary from d2t / t2d, outside shares per prompt, per label and pooled, the most frequent
outside tokens, and the vocabulary-limited oracle walk that gives the ceiling.
"""
from __future__ import annotations

import pytest
import torch

from eagle_nb.conditions.coverage import ceiling_counts, coverage, draft_vocab_mask

INSIDE = draft_vocab_mask(10, t2d=torch.tensor([True] * 5 + [False] * 5))    # ids 0..4


def test_the_draft_vocabulary_comes_from_d2t_then_t2d_then_identity():
    """d2t offsets map draft id i to i + d2t[i] (the engines' map); t2d is used when d2t is absent;
    neither means draft vocab == target vocab. Absolute ids in d2t are refused naming the cause."""
    d2t = torch.tensor([1, 1, 3])                    # draft 0, 1, 2 -> target 1, 2, 5
    assert draft_vocab_mask(6, d2t).nonzero().flatten().tolist() == [1, 2, 5]
    assert draft_vocab_mask(6, t2d=torch.tensor([0, 1, 0, 0, 0, 1])).sum() == 2
    assert draft_vocab_mask(4).all()
    with pytest.raises(ValueError, match="absolute ids"):
        draft_vocab_mask(6, torch.tensor([3, 4, 5]))     # 2 + 5 = 7 >= 6
    with pytest.raises(ValueError, match="t2d has 3 entries"):
        draft_vocab_mask(6, t2d=torch.tensor([1, 0, 1]))


def test_ceiling_walk_accepts_the_in_vocabulary_run_up_to_depth():
    """[0 1 5 2 3 3 7] with ids 0..4 inside, depth 2: from the prefill token the step accepts 1
    (5 is outside), then 2 (capped), then 0 (7 outside); [6 6 6] accepts nothing twice."""
    assert ceiling_counts([0, 1, 5, 2, 3, 3, 7], INSIDE, 2) == [1, 2, 0]
    assert ceiling_counts([6, 6, 6], INSIDE, 2) == [0, 0]
    assert ceiling_counts([3], INSIDE, 2) == []
    assert ceiling_counts([0, 1, 2, 3, 4], INSIDE, 8) == [4]       # the end of the continuation


def test_coverage_per_prompt_label_and_pooled():
    """Two prompts, one English, one Spanish: 2 of 7 and 3 of 3 tokens outside, 5 of 10 pooled;
    the ceiling walk's tau is 1 + 3 / 5; the top outside token is 6 (three times)."""
    cov = coverage([[0, 1, 5, 2, 3, 3, 7], [6, 6, 6]], INSIDE, depth=2,
                   fields=[{"language": "en"}, {"language": "es", "category": "chat"}])
    assert cov.per_prompt == [2 / 7, 1.0]
    assert (cov.tokens, cov.outside, cov.outside_share, cov.inside_share) == (10, 5, 0.5, 0.5)
    assert cov.groups["language"]["es"] == {"prompts": 1, "tokens": 3, "outside": 3, "outside_share": 1.0}
    assert cov.groups["language"]["en"]["outside_share"] == 2 / 7
    assert cov.groups["category"] == {"chat": {"prompts": 1, "tokens": 3, "outside": 3, "outside_share": 1.0}}
    assert cov.top_outside[0] == (6, 3) and dict(cov.top_outside) == {6: 3, 5: 1, 7: 1}
    assert cov.tau_ceiling == pytest.approx(1 + 3 / 5)
    assert cov.per_position_ceiling == pytest.approx([2 / 5, 1 / 5])
    assert cov.draft_vocab_size == 5 and cov.as_dict()["inside_share"] == 0.5
    text = "\n".join(cov.report_lines(decode=lambda ids: f"<{ids[0]}>"))
    assert "50.00% (5 of 10)" in text and "language=es: 100.00% outside" in text and "6 '<6>' x3" in text


def test_coverage_refuses_what_it_cannot_count():
    """Ids outside the target vocabulary and a label list of the wrong length are errors."""
    with pytest.raises(ValueError, match="token id 12 outside"):
        coverage([[1, 12]], INSIDE)
    with pytest.raises(ValueError, match="2 label rows for 1"):
        coverage([[1]], INSIDE, fields=[{}, {}])


def test_full_vocabulary_has_no_ceiling_below_k_plus_1():
    """A drafter with the whole vocabulary: nothing outside; the ceiling walk accepts k per step."""
    cov = coverage([list(range(11))], draft_vocab_mask(12), depth=4)
    assert cov.outside == 0 and cov.tau_ceiling == 5.0 and cov.top_outside == []
