"""Training accuracy beside serving acceptance: does the checkpoint, as written, reproduce the
per-step accuracy its trainer reported?

The one pass (loop/onepass.py) measures, on the user's prompts, the same teacher-forced numbers
trainers log (acc_j for SpecForge / SafeAILab EAGLE, the chained full_acc_j for speculators;
io/train_logs.py reads their logs). Two outcomes:
  * reproduced (the files reach the trained accuracy, within `TOLERANCE`): the checkpoint is the
    drafter that trained; if the engine accepts little, look at the serving side (capture, aux layer
    ids, the fc width check, d2t in the engine);
  * not reproduced: the files are not the drafter that trained; look at the checkpoint and its
    conversion (key map, lm_head / embed_tokens present, d2t/t2d, norm flags in the config).
Training data and the user's prompts differ, so the tolerance is loose: trained and measured
accuracy agree to a few points on the code pair (data/code_pair/drafter_metrics.json vs the one
pass). A drafter trained on narrow data loses more on other prompts without any broken file: the
kit's first real-pair drafter logged 0.49 / 0.43 / 0.38 / 0.34 / 0.31 on requests held out from
its own templates and gave 0.32 / 0.28 / 0.24 / 0.22 / 0.21 on the hand-written evaluation
prompts, with every structural check passing (data/README.md); and a converter that reorders the
fc input blocks of the code pair's drafter keeps 74% of its trained accuracy. The size of the
shortfall cannot tell the two apart, so a failure with no other check failing says both, and the
verdict built on it alone is given at medium confidence, not high (verdict.py).

Knows the metrics fields and the check type; runs no model.
"""
from __future__ import annotations

from eagle_nb.doctor.diagnosis import Check
from eagle_nb.io.train_logs import INDEPENDENT, TrainAccuracy

TOLERANCE = 0.10       # mean shortfall over the compared steps still counted as "reproduced"
CHECK_ID = "train-accuracy"
TITLE = "training accuracy reproduced on the files"


def _fmt(xs) -> str:
    return " / ".join(f"{x:.2f}" for x in xs)


def measured(metrics, kind: str) -> list[float] | None:
    """The one pass's numbers of the trainer's kind (None: not computed by a one pass)."""
    return metrics.teacher_forced_accuracy if kind == INDEPENDENT else metrics.teacher_forced_chain_accuracy


def training_check(train: TrainAccuracy, metrics, n_prompts: int, new_tokens: int,
                   checks=()) -> Check:
    """Compare the trainer's per-step accuracy with the one pass's on the files. Not reproduced,
    it points at the faults the other checks fail on, else at those they warn about (and then
    says that narrow training data explains it as well)."""
    ours = measured(metrics, train.kind)
    if not ours:
        return Check(CHECK_ID, "skip", TITLE, "the measurement carries no teacher-forced accuracy "
                     "(it was not computed by the one pass)")
    n = min(len(train.values), len([x for x in ours if x is not None]))
    gap = sum(t - o for t, o in zip(train.values[:n], ours[:n])) / n
    name = "acc_j (step j right)" if train.kind == INDEPENDENT else "full_acc_j (steps 1..j right)"
    ev = (f"{name} steps 1..{n}: training reported {_fmt(train.values[:n])} ({train.source}); the "
          f"files give {_fmt(ours[:n])} on {n_prompts} prompts x {new_tokens} tokens (one pass, "
          f"teacher-forced on the target's greedy tokens); mean shortfall {gap:+.2f}")
    data = {"kind": train.kind, "trained": list(train.values[:n]), "files": list(ours[:n]),
            "source": train.source}
    failing = sorted({f for c in checks if c.status == "fail" for f in c.faults})
    if gap > TOLERANCE:
        why = ("so the files are not the drafter that trained" if failing else
               "and every other check passes: either these prompts are far from the training data "
               "(a narrow training set loses this much on other text with nothing broken) or the "
               "files are not the drafter that trained")
        return Check(CHECK_ID, "fail", TITLE, ev + f" > {TOLERANCE:.2f}: not reproduced, {why}",
                     failing or sorted({f for c in checks if c.status == "warn" for f in c.faults}),
                     "measure on prompts like the training data (--prompts): reproduced there, the "
                     "drafter needs broader training data; not reproduced, look at the checkpoint and "
                     "its conversion: key map (eagle-nb convert), lm_head and embed_tokens present, "
                     "d2t/t2d, norm flags in the config", data)
    return Check(CHECK_ID, "pass", TITLE, ev + ": reproduced; if the engine accepts less, the loss "
                 "is on the serving side (capture, aux layer ids, the fc width check, d2t in the "
                 "engine)", data=data)


def read_training(train_log, train_acc) -> TrainAccuracy | None:
    """What training reported: a log file or typed numbers (one of them, or neither)."""
    from eagle_nb.io import train_logs
    if train_log is not None and train_acc is not None:
        raise ValueError("give a training log or training accuracies, not both")
    if train_log is not None:
        return train_logs.read_train_log(train_log)
    return None if train_acc is None else train_logs.from_numbers(train_acc)


def train_accuracy(pair, prompts, train: TrainAccuracy, depth: int, max_new_tokens: int,
                   checks=()) -> Check:
    """The check, measured by the one pass on the pair's files for as many steps as training
    logged (at most 8)."""
    from eagle_nb.experiment.setting import Setting
    k = min(8, max(depth, len(train.values)))
    res = pair.run(prompts, Setting(depth=k, max_new_tokens=max_new_tokens), progress=False)
    return training_check(train, res.metrics, len(prompts), max_new_tokens, checks)
