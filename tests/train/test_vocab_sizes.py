"""train/vocab_sizes.py: candidate draft-vocabulary sizes from the committed answers, measured on
held-out answers (never counted into the vocabulary) and other workloads, by label."""
import pytest
import torch

from eagle_nb.train.vocab_sizes import report_lines, size_rows, split_answers, summary


def _committed():
    reqs = [{"id": i, "language": "es" if i % 2 else "en", "category": "chat"} for i in range(6)]
    answers = {i: {"answer_ids": [1, 1, 2, 3] if i else [4, 4, 1, 5]} for i in range(5)}  # 5 unanswered
    return reqs, answers


def test_held_out_answers_never_count_into_the_vocabulary():
    """Every 3rd request (ids 0, 3) is held out: its tokens are not in the training counts; an
    unanswered request is skipped, and `answered` keeps only the first n answered."""
    reqs, answers = _committed()
    train, held, labels = split_answers(reqs, answers, heldout_every=3)
    assert sorted(train.tolist()) == sorted([1, 1, 2, 3] * 3)        # ids 1, 2, 4
    assert held == [[4, 4, 1, 5], [1, 1, 2, 3]] and labels[0] == {"language": "en", "category": "chat"}
    train, held, _ = split_answers(reqs, answers, heldout_every=3, answered=3)
    assert train.numel() == 8 and len(held) == 1
    with pytest.raises(ValueError, match="held-out"):
        split_answers(reqs[1:3], answers, heldout_every=3)             # ids 1, 2: none held out


def test_a_size_covers_exactly_its_most_frequent_ids():
    """Size 1 keeps the most frequent training id (1): half of [1, 1, 2, 3], and of the held-out
    [4, 4, 1, 5] only the 1; size 3 keeps 1, 2, 3. Labels group the shares; a mask given beside
    is measured the same way."""
    reqs, answers = _committed()
    train, held, labels = split_answers(reqs, answers, heldout_every=3)
    extra = torch.zeros(8, dtype=torch.bool)
    extra[[4, 5]] = True
    rows = size_rows(train, {"held": (held, labels)}, [1, 3], vocab_size=8, depth=2, extra={"mine": extra})
    assert [r["size"] for r in rows] == [1, 3, 2]
    assert rows[0]["training_share"] == pytest.approx(0.5) and rows[1]["training_share"] == 1.0
    assert rows[0]["held"].inside_share == pytest.approx(3 / 8)       # 1 of [4,4,1,5], 2 of [1,1,2,3]
    s = summary(rows[1]["held"])
    assert s["by_language"] == {"en": 0.25, "es": 1.0} and s["inside_share"] == pytest.approx(5 / 8)
    assert rows[2]["training_share"] == 0.0 and summary(rows[2]["held"])["by_language"]["en"] == 0.75
    assert any("top 3 of the answers (3 ids)" in line for line in report_lines(rows))
