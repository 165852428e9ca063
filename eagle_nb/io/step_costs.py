"""What one speculative step costs at a batch size: `StepCosts` (one drafter step, and the target's
verify forward over k + 1 tokens per sequence), given by the user for their GPU as numbers or a
small JSON / CSV file, or measured by `profiles/batch_costs.py` on the local pair. `eagle-nb tune`
reads them (docs/profile.md states the model they feed).

Any time unit works as long as one file uses one (seconds, milliseconds, or relative to the
target's step). `t_verify` at k = 0 is the target-only decode step, the baseline of the speedup.
One `t_verify` for every k is the usual assumption (a verify over a few tokens costs a decode
step: memory-bound); several are interpolated linearly and never extrapolated.

Files:
  JSON  {"unit": "ms", "costs": [{"batch_size": 1, "t_draft": 0.6, "t_verify": 1.0},
                                 {"batch_size": 8, "t_draft": 0.7, "t_verify": {"0": 1.1, "5": 1.6}}]}
  CSV   batch_size,t_draft,t_verify[,k]   (a row without k gives t_verify for every k)
Read safely (files.py); errors name the file, the row and the field. Knows nothing about models.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

from eagle_nb.io.files import CONFIG_CAP, UserFileError, read_text, show


class CostError(UserFileError):
    """Step costs are malformed; the message names the field."""


@dataclass
class StepCosts:
    batch_size: int
    t_draft: float                            # one drafter step for the whole batch
    t_verify: dict[int, float]                # k -> target forward over k+1 tokens per sequence
    unit: str = "s"
    source: str = "given"

    def __post_init__(self):
        where = f"batch_size {self.batch_size}"
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise CostError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        self.t_draft = _time(self.t_draft, f"{where}: t_draft")
        if not self.t_verify:
            raise CostError(f"{where}: t_verify is empty")
        tv = {_k(k, where): _time(v, f"{where}: t_verify[{k}]", positive=True)
              for k, v in self.t_verify.items()}
        self.t_verify = dict(sorted(tv.items()))

    def verify_at(self, k: int) -> float:
        """t_verify at draft length k: the one value for every k, or interpolated linearly between
        the given ks (never outside them)."""
        ks = sorted(self.t_verify)
        if len(ks) == 1:
            return self.t_verify[ks[0]]
        if k in self.t_verify:
            return self.t_verify[k]
        if not ks[0] <= k <= ks[-1]:
            raise CostError(f"batch_size {self.batch_size}: t_verify is given for k = "
                            f"{', '.join(map(str, ks))}; k = {k} is outside (give it, or one "
                            "t_verify for every k)")
        hi = next(x for x in ks if x > k)
        lo = max(x for x in ks if x < k)
        w = (k - lo) / (hi - lo)
        return (1 - w) * self.t_verify[lo] + w * self.t_verify[hi]

    @property
    def t_target(self) -> float:
        """The target-only decode step (t_verify at k = 0), the speedup's baseline."""
        return self.verify_at(0)

    def as_dict(self) -> dict:
        return {"batch_size": self.batch_size, "t_draft": self.t_draft,
                "t_verify": {str(k): v for k, v in self.t_verify.items()}, "unit": self.unit,
                "source": self.source}


def _time(v, where: str, positive: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
            or (positive and v == 0):
        raise CostError(f"{where} must be a finite {'positive' if positive else 'non-negative'} "
                        f"time, got {v!r}")
    return float(v)


def _k(k, where: str) -> int:
    try:
        k = int(k)
    except (TypeError, ValueError):
        raise CostError(f"{where}: t_verify key {k!r} is not a draft length") from None
    if k < 0:
        raise CostError(f"{where}: t_verify key {k} is negative")
    return k


def costs_from_numbers(t_draft: float, t_verify: float, batch_size: int = 1,
                       unit: str = "s") -> StepCosts:
    """One batch size's costs from two numbers (t_verify the same for every k)."""
    return StepCosts(batch_size, t_draft, {0: t_verify}, unit=unit, source="given")


def read_step_costs(path) -> list[StepCosts]:
    """Step costs from a JSON or CSV file (see the module docstring), one per batch size."""
    text = read_text(path, "step-costs file", CONFIG_CAP)
    if Path(path).suffix.lower() == ".csv":
        return _from_csv(text, path)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise CostError(f"step-costs file {show(path)}: invalid JSON ({e})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("costs"), list) or not obj["costs"]:
        raise CostError(f"step-costs file {show(path)}: expected an object with a non-empty 'costs' "
                        'list, e.g. {"unit": "ms", "costs": [{"batch_size": 1, "t_draft": 0.6, '
                        '"t_verify": 1.0}]}')
    unit = str(obj.get("unit", "s"))
    out = []
    for i, row in enumerate(obj["costs"]):
        where = f"step-costs file {show(path)}: costs[{i}]"
        if not isinstance(row, dict) or not {"batch_size", "t_draft", "t_verify"} <= set(row):
            raise CostError(f"{where}: expected an object with batch_size, t_draft and t_verify")
        tv = row["t_verify"] if isinstance(row["t_verify"], dict) else {0: row["t_verify"]}
        try:
            out.append(StepCosts(row["batch_size"], row["t_draft"], tv, unit=unit,
                                 source=show(path)))
        except CostError as e:
            raise CostError(f"{where}: {e}") from None
    return _unique(out, path)


def _from_csv(text: str, path) -> list[StepCosts]:
    rows = list(csv.DictReader(io.StringIO(text)))
    need = {"batch_size", "t_draft", "t_verify"}
    if not rows or not need <= set(rows[0]):
        raise CostError(f"step-costs file {show(path)}: expected a header with batch_size, t_draft, "
                        f"t_verify (and optionally k), got {sorted(rows[0]) if rows else 'no rows'}")
    by_b: dict[int, dict] = {}
    for n, row in enumerate(rows, 2):
        where = f"step-costs file {show(path)}:{n}"
        try:
            b, td, tv = int(row["batch_size"]), float(row["t_draft"]), float(row["t_verify"])
            k = int(row["k"]) if (row.get("k") or "").strip() else 0
        except (TypeError, ValueError):
            raise CostError(f"{where}: batch_size and k must be integers, t_draft and t_verify "
                            f"numbers; got {dict(row)}") from None
        d = by_b.setdefault(b, {"t_draft": td, "t_verify": {}})
        if d["t_draft"] != td:
            raise CostError(f"{where}: t_draft {td} differs from {d['t_draft']} on an earlier row "
                            f"of batch_size {b}: one drafter step cost per batch size")
        d["t_verify"][k] = tv
    try:
        return sorted((StepCosts(b, d["t_draft"], d["t_verify"], source=show(path))
                       for b, d in by_b.items()), key=lambda c: c.batch_size)
    except CostError as e:
        raise CostError(f"step-costs file {show(path)}: {e}") from None


def _unique(costs: list[StepCosts], path) -> list[StepCosts]:
    seen = [c.batch_size for c in costs]
    dup = sorted({b for b in seen if seen.count(b) > 1})
    if dup:
        raise CostError(f"step-costs file {show(path)}: batch_size {dup} given twice")
    return sorted(costs, key=lambda c: c.batch_size)


def write_step_costs(costs: list[StepCosts], path) -> None:
    """The JSON form `read_step_costs` reads (e.g. to keep costs measured here)."""
    units = {c.unit for c in costs}
    rows = [{k: v for k, v in c.as_dict().items() if k != "unit"} for c in costs]
    Path(path).write_text(json.dumps({"unit": units.pop() if len(units) == 1 else "s",
                                      "costs": rows}, indent=2) + "\n")

