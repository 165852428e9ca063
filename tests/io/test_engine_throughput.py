"""An engine's measured throughput by draft length (eagle_nb/io/engine_throughput.py, written by
benchmarks/vllm_tune.py, plotted in notebook 04): read strictly, speedups over k = 0 per batch size,
and the figure draws the measured and predicted values it was given."""
from __future__ import annotations

import json

import matplotlib
import pytest

from eagle_nb.io.engine_throughput import EngineThroughputError, read_engine_throughput, speedups
from eagle_nb.io.paths import ENGINE_TUNE_RECORD
from eagle_nb.views.tune_plot import plot_engine_throughput

matplotlib.use("Agg")


def _record():
    rows = [{"batch": b, "k": k, "throughput": base * s, "engine_tau": 1 + 0.3 * k, "predicted": base * p}
            for b, base in ((1, 20.0), (8, 100.0))
            for k, s, p in ((0, 1.0, 1.0), (1, 1.2, 1.2), (2, 1.1, 1.25))]
    return {"pair": "pair", "prompts": 2, "max_new_tokens": 8, "kit_marginal": [0.4, 0.2], "rows": rows,
            "tune": [{"batch": 1, "measured_best": 1, "tune_pick": 2, "share": 1.1 / 1.2}]}


def _write(tmp_path, rec, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(rec) if not isinstance(rec, str) else rec)
    return p


def test_speedups_are_over_the_batch_sizes_own_k0():
    rec = _record()
    s = speedups(rec)
    assert sorted(s) == [1, 8]
    assert [k for k, _, _ in s[8]] == [0, 1, 2]
    assert s[8][1][1] == pytest.approx(1.2) and s[1][2][2] == pytest.approx(1.25)


def test_bad_records_name_the_file_and_field(tmp_path):
    with pytest.raises(EngineThroughputError, match=r"t\.json: not JSON"):
        read_engine_throughput(_write(tmp_path, "{nope"))
    with pytest.raises(EngineThroughputError, match="no 'rows' list"):
        read_engine_throughput(_write(tmp_path, {"rows": []}))
    rec = _record()
    del rec["rows"][3]["predicted"]
    with pytest.raises(EngineThroughputError, match=r"rows\[3\] has no predicted"):
        read_engine_throughput(_write(tmp_path, rec))
    rec = _record()
    rec["rows"][4]["throughput"] = 0
    with pytest.raises(EngineThroughputError, match=r"rows\[4\]\.throughput = 0"):
        read_engine_throughput(_write(tmp_path, rec))
    rec = _record()
    rec["rows"] = [r for r in rec["rows"] if not (r["batch"] == 8 and r["k"] == 0)]
    with pytest.raises(EngineThroughputError, match="batch 8 has no k = 0 row"):
        read_engine_throughput(_write(tmp_path, rec))


def test_figure_draws_measured_and_predicted_speedups(tmp_path):
    rec = read_engine_throughput(_write(tmp_path, _record()))
    lines = {ln.get_label(): ln for ln in plot_engine_throughput(rec).axes[0].get_lines()}
    assert list(lines["batch 8, measured"].get_ydata()) == pytest.approx([1.0, 1.2, 1.1])
    assert list(lines["batch 1, tune's prediction"].get_ydata()) == pytest.approx([1.0, 1.2, 1.25])
    assert "no speculation (k = 0)" in lines


@pytest.mark.skipif(not ENGINE_TUNE_RECORD.is_file(), reason="benchmarks/vllm_tune.py has not been run")
def test_the_committed_record_covers_both_batch_sizes_from_k0():
    """The table notebook 04 plots: every batch size measured at the same draft lengths from 0, and
    each batch size's tune entry points at k values that were measured."""
    rec = read_engine_throughput(ENGINE_TUNE_RECORD)
    s = speedups(rec)
    ks = {b: [k for k, _, _ in rows] for b, rows in s.items()}
    assert len(set(map(tuple, ks.values()))) == 1 and next(iter(ks.values()))[0] == 0
    for t in rec["tune"]:
        assert t["measured_best"] in ks[t["batch"]] and t["tune_pick"] in ks[t["batch"]]
