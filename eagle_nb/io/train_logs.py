"""What a drafter's training reported: per-step (TTT position) accuracy, from the trainer's own
log lines or from numbers the user typed. One reader, `read_train_log`, for three trainers' formats
(read in their source; the kit's one pass computes the same numbers, loop/onepass.py):

* SafeAILab EAGLE (`eagle/traineagle3/main.py`) and SpecForge v0.1.0
  (`scripts/train_eagle3_online.py`) print, per epoch,
  `Train Epoch [{epoch}/{num_epochs}], position {i},  Acc: {acc:.2f}` (and `Test` / `Eval Epoch`
  for held-out data): acc_i = step i's draft equals the target's argmax, whatever steps < i did.
* SpecForge `scripts/train_eagle3.py` (after PR #308, Nov 2025) prints, for train and eval alike,
  `Eval - Step {step} [{step + 1}/{num_epochs}], position {i},  Acc: {acc:.2f}`, and its tracker
  dict holds `train/acc_{i}` / `eval/acc_{i}` (also accepted as `key: value` or `key=value` text).
* speculators (`src/speculators/train/logger.py` FormatDictFilter, `models/eagle3/metrics.py`)
  logs `train/full_acc_{i}=0.812, train/cond_acc_{i}=0.790, ...` (`val/..._epoch` on held-out
  data): full_acc_i = steps 0..i all right (chained); cond_acc_i = full_acc_i / full_acc_{i-1}.

Held-out numbers are preferred over training numbers when a log has both; the last value of each
position wins (the end of training). Knows nothing about models.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from eagle_nb.io.files import read_bytes

TRAIN_LOG_CAP = 512 * 2**20
INDEPENDENT = "acc"        # step j right whatever steps < j did (SpecForge, EAGLE)
CHAINED = "full_acc"       # steps 0..j all right (speculators)

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_EPOCH = re.compile(r"\b(Train|Test|Eval) Epoch \[\d+/\d+\], position (\d+),\s+Acc: " + _NUM)
_STEP = re.compile(r"\bEval - Step \d+ \[\d+/\d+\], position (\d+),\s+Acc: " + _NUM)
_DICT = re.compile(r"""(?:^|[\s,{'"(])((?:train|eval|test|val)/)?(acc|epochacc|full_acc|cond_acc)_(\d+)"""
                   r"""(?:_epoch)?['"]?\s*[:=]\s*""" + _NUM)
HELD_OUT = {"test", "eval", "val"}


class TrainLogError(ValueError):
    """No accuracy line in the file, or numbers that cannot be accuracies."""


@dataclass
class TrainAccuracy:
    """Accuracy per draft step j = 1..n as a trainer reported it."""
    kind: str                          # INDEPENDENT or CHAINED
    values: list[float]
    source: str                        # trainer format and split, or "given"
    lines: int = 0                     # matching lines read
    notes: list[str] = field(default_factory=list)


def from_numbers(values, kind: str = INDEPENDENT) -> TrainAccuracy:
    """Accuracies typed by the user, e.g. "0.8,0.6,0.5" (steps 1, 2, 3)."""
    if isinstance(values, str):
        try:
            values = [float(x) for x in values.split(",") if x.strip()]
        except ValueError:
            raise TrainLogError(f"training accuracy: expected comma-separated numbers, got {values!r}") from None
    values = [float(v) for v in values]
    return _checked(TrainAccuracy(kind, values, "given"))


def _checked(t: TrainAccuracy) -> TrainAccuracy:
    if not t.values:
        raise TrainLogError(f"{t.source}: no accuracy values")
    bad = [v for v in t.values if not 0 <= v <= 1]
    if bad:
        raise TrainLogError(f"{t.source}: accuracies must lie in [0, 1], got {bad[:3]}")
    return t


def _ordered(found: dict[int, float]) -> list[float]:
    """Values of positions 0..n-1 (stopping at the first missing position)."""
    out = []
    while len(out) in found:
        out.append(found[len(out)])
    return out


def parse_train_log(text: str, source: str = "log") -> TrainAccuracy:
    """The last reported accuracy per step, held-out split first (see the module docstring)."""
    seen: dict[tuple[str, str, str], dict[int, float]] = {}   # (trainer, kind, split) -> {i: v}
    lines = 0
    for line in text.splitlines():
        hits = []
        m = _EPOCH.search(line)
        if m:
            hits.append(("SafeAILab EAGLE / SpecForge v0.1 epoch line", INDEPENDENT,
                         m.group(1).lower(), int(m.group(2)), float(m.group(3))))
        m = _STEP.search(line)
        if m:
            hits.append(("SpecForge train_eagle3.py step line", INDEPENDENT, "log", int(m.group(1)),
                         float(m.group(2))))
        for m in _DICT.finditer(line):
            split = (m.group(1) or "train/").rstrip("/")
            name = m.group(2)
            if name == "cond_acc":
                continue                      # derived from full_acc; not a separate series
            kind = CHAINED if name == "full_acc" else INDEPENDENT
            who = "speculators metrics" if kind == CHAINED else "SpecForge / EAGLE tracker keys"
            hits.append((who, kind, split, int(m.group(3)), float(m.group(4))))
        for who, kind, split, i, v in hits:
            seen.setdefault((who, kind, split), {})[i] = v
        lines += bool(hits)
    if not seen:
        raise TrainLogError(f"{source}: no training accuracy lines (SafeAILab EAGLE / SpecForge "
                            f"'position i,  Acc: x', tracker 'train/acc_i', speculators "
                            f"'train/full_acc_i=x') found")
    key = max(seen, key=lambda k: (k[2] in HELD_OUT, len(_ordered(seen[k]))))
    t = TrainAccuracy(key[1], _ordered(seen[key]), f"{source}: {key[0]} ({key[2]})", lines)
    others = [f"{w} ({s})" for (w, _, s) in seen if (w, _, s) != key]
    if others:
        t.notes.append(f"also found: {', '.join(others)}; used the {key[2]} numbers")
    return _checked(t)


def read_train_log(path) -> TrainAccuracy:
    """`parse_train_log` of a file, read safely (size cap, UTF-8 errors replaced)."""
    data = read_bytes(path, "training log", TRAIN_LOG_CAP).decode("utf-8", errors="replace")
    return parse_train_log(data, str(path))


# How each trainer prints one position's accuracy (the formats `parse_train_log` reads).
LINE_FORMATS = {
    "eagle": "Train Epoch [{epoch}/{epochs}], position {i},  Acc: {acc:.2f}",     # SafeAILab, SpecForge v0.1
    "specforge": "Eval - Step {epoch} [{next}/{epochs}], position {i},  Acc: {acc:.2f}",
    "speculators": "train/full_acc_{i}={acc:.3f}",
}


def write_train_log(path, values, fmt: str = "eagle", epochs: int = 1) -> Path:
    """Write per-step accuracies as trainer `fmt` prints them at its last epoch (a stand-in for a
    real training log in tests and notebooks). Returns the path."""
    if fmt not in LINE_FORMATS:
        raise ValueError(f"unknown training log format {fmt!r}; known: {sorted(LINE_FORMATS)}")
    lines = [LINE_FORMATS[fmt].format(epoch=epochs, next=epochs + 1, epochs=epochs, i=i, acc=a)
             for i, a in enumerate(values)]
    text = ", ".join(lines) if fmt == "speculators" else "\n".join(lines)
    path = Path(path)
    path.write_text(text + "\n")
    return path


def shipped_train_accuracy(drafter=None) -> TrainAccuracy:
    """What the kit's own trainer reported for a shipped drafter (`drafter` its folder; None: the
    default pair's): the held-out numbers of its committed training log when the pair ships one
    (the real pair: data/drafter_train.log), else the per-step accuracy EMA over the last training
    steps in its drafter_metrics.json (the code pair). ValueError for a drafter the kit did not ship."""
    import json

    from eagle_nb.io.paths import pair_of
    pf = pair_of(drafter)
    if pf.train_log is not None:
        return read_train_log(pf.train_log)
    f = pf.drafter_metrics
    values = json.loads(read_bytes(f, "drafter metrics", 2**20))["train_accuracy_per_step_ema"]
    return _checked(TrainAccuracy(INDEPENDENT, [float(v) for v in values], f"{f.name} (kit trainer)"))
