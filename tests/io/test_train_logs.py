"""Training logs: each trainer's own accuracy lines (SafeAILab EAGLE / SpecForge epoch lines,
SpecForge step lines and tracker keys, speculators metric dicts) read to per-step accuracy, the
held-out split preferred, typed numbers checked, and a file without such lines refused."""
from __future__ import annotations

import pytest

from eagle_nb.io.train_logs import (
    CHAINED,
    INDEPENDENT,
    TrainLogError,
    from_numbers,
    parse_train_log,
    read_train_log,
)

EAGLE = """Train Epoch [1/20], position 0,  Acc: 0.61
Train Epoch [2/20], position 0,  Acc: 0.71
Train Epoch [2/20], position 1,  Acc: 0.65
Train Epoch [2/20], position 1, pLoss: 1.20
Test Epoch [2/20], position 0,  Acc: 0.69
Test Epoch [2/20], position 1,  Acc: 0.60
"""
SPECFORGE_STEP = """Eval - Step 100 [101/3], position 0,  Acc: 0.80
Eval - Step 100 [101/3], position 1,  Acc: 0.70
Eval - Step 100 [101/3], position 1, pLoss: 1.3
"""
SPECULATORS = ("[12:00:01] INFO     train/loss_0=1.234, train/full_acc_0=0.812, train/cond_acc_0=0.812, "
               "train/full_acc_1=0.600, train/cond_acc_1=0.739, epoch=0, lr=1.00e-04\n")
TRACKER = '{"train/acc_0": 0.75, "train/acc_1": 0.62, "train/lr": 0.0001}\n'


@pytest.mark.parametrize("text, kind, values, who", [
    (EAGLE, INDEPENDENT, [0.69, 0.60], "(test)"),
    (SPECFORGE_STEP, INDEPENDENT, [0.80, 0.70], "SpecForge train_eagle3.py"),
    (SPECULATORS, CHAINED, [0.812, 0.600], "speculators"),
    (TRACKER, INDEPENDENT, [0.75, 0.62], "tracker keys"),
], ids=["eagle-epoch", "specforge-step", "speculators", "tracker-dict"])
def test_each_trainer_format_reads_to_per_step_accuracy(text, kind, values, who):
    """The last value per position, of the right kind, from the held-out split when there is one."""
    t = parse_train_log(text, "x.log")
    assert (t.kind, t.values) == (kind, values) and who in t.source


def test_typed_numbers_and_refusals(tmp_path):
    """Typed accuracies are read in order; values outside [0, 1], text that is not numbers and a
    log with no accuracy lines are refused with a message naming what was expected."""
    assert from_numbers("0.8, 0.6,0.5").values == [0.8, 0.6, 0.5]
    with pytest.raises(TrainLogError, match=r"\[0, 1\]"):
        from_numbers("80,60")
    with pytest.raises(TrainLogError, match="comma-separated"):
        from_numbers("high")
    f = tmp_path / "empty.log"
    f.write_text("step 1 loss 2.0\n")
    with pytest.raises(TrainLogError, match="no training accuracy lines"):
        read_train_log(f)
    f.write_bytes(EAGLE.encode() + b"\xff garbage\n")
    assert read_train_log(f).values == [0.69, 0.60]
