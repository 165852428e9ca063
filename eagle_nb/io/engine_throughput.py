"""An engine's measured throughput by draft length and batch size, as benchmarks/vllm_tune.py writes
it (`io.paths.ENGINE_TUNE_RECORD`): one row per (batch, k) with the measured tokens per second, the
engine's own tau, and what `eagle-nb tune` predicted from the kit's profile with step costs taken
from the engine (plain decode at k = 0, draft and verify fitted at k = 1 and 2); one `tune` entry
per batch size with the measured best k, tune's pick and those step costs.

    {"pair": "...", "prompts": 8, "max_new_tokens": 64, "kit_marginal": [...],
     "rows": [{"batch": 1, "k": 0, "throughput": 30.1, "engine_tau": 1.0, "predicted": 30.1}, ...],
     "tune": [{"batch": 1, "measured_best": 2, "tune_pick": 2, "share": 1.0}, ...]}

Read safely (files.py); errors name the file and the field. Knows nothing about engines.
"""
from __future__ import annotations

import json
import math

from eagle_nb.io.files import CONFIG_CAP, UserFileError, read_text, show

ROW_FIELDS = ("batch", "k", "throughput", "engine_tau", "predicted")


class EngineThroughputError(UserFileError):
    """A measured-throughput record is malformed; the message names the file and the field."""


def read_engine_throughput(path) -> dict:
    """The record at `path`, checked: every row has the fields above, positive throughputs, and
    every batch size has its k = 0 row (the no-speculation baseline of the speedups)."""
    where = show(path)
    try:
        rec = json.loads(read_text(path, "an engine throughput record", CONFIG_CAP))
    except json.JSONDecodeError as e:
        raise EngineThroughputError(f"{where}: not JSON ({e}); rerun benchmarks/vllm_tune.py") from e
    rows = rec.get("rows") if isinstance(rec, dict) else None
    if not isinstance(rows, list) or not rows:
        raise EngineThroughputError(f"{where}: no 'rows' list; rerun benchmarks/vllm_tune.py")
    for i, r in enumerate(rows):
        missing = [f for f in ROW_FIELDS if f not in r]
        if missing:
            raise EngineThroughputError(f"{where}: rows[{i}] has no {', '.join(missing)}")
        for f in ("throughput", "predicted"):
            if not (isinstance(r[f], (int, float)) and math.isfinite(r[f]) and r[f] > 0):
                raise EngineThroughputError(f"{where}: rows[{i}].{f} = {r[f]!r}, not a positive number")
    for b in sorted({r["batch"] for r in rows}):
        if not any(r["batch"] == b and r["k"] == 0 for r in rows):
            raise EngineThroughputError(f"{where}: batch {b} has no k = 0 row (the no-speculation baseline)")
    return rec


def speedups(rec: dict) -> dict[int, list[tuple[int, float, float]]]:
    """batch -> [(k, measured speedup over k = 0, predicted speedup)] sorted by k."""
    out = {}
    for b in sorted({r["batch"] for r in rec["rows"]}):
        rows = sorted((r for r in rec["rows"] if r["batch"] == b), key=lambda r: r["k"])
        base = rows[0]["throughput"]
        out[b] = [(r["k"], r["throughput"] / base, r["predicted"] / base) for r in rows]
    return out
