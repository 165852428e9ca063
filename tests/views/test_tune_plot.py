"""`plot_tune` (eagle_nb/views/tune_plot.py): throughput (or speedup) against draft length, one line
per batch size, the best k starred; a Figure drawn headless with no pyplot state, legible."""
from __future__ import annotations

import matplotlib
from matplotlib.figure import Figure

from eagle_nb.io.step_costs import StepCosts, costs_from_numbers
from eagle_nb.profiles.tune import tune
from eagle_nb.views.palette import figure_to_png
from eagle_nb.views.tune_plot import plot_tune
from helpers import legibility_problems

matplotlib.use("Agg")


def _tuned():
    costs = [costs_from_numbers(0.2, 1.0, batch_size=1), StepCosts(8, 0.3, {0: 1.2, 5: 2.5})]
    return tune([0.85, 0.7, 0.55, 0.4, 0.3], costs)


def test_one_line_per_batch_size_with_the_values():
    """Each batch size is a line over k = 1..5 whose y values are the rows' speedups (or
    throughputs with relative=False); the break-even guide sits at 1."""
    t = _tuned()
    fig = plot_tune(t)
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    for b in (1, 8):
        ln = lines[f"batch {b}"]
        assert list(ln.get_xdata()) == [1, 2, 3, 4, 5]
        assert list(ln.get_ydata()) == [r.speedup for r in t.at(b)]
    assert "target-only decoding" in lines
    raw = plot_tune(t, relative=False).axes[0]
    ys = {ln.get_label(): list(ln.get_ydata()) for ln in raw.get_lines()}
    assert ys["batch 8"] == [r.throughput for r in t.at(8)]


def test_headless_and_legible():
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    fig = plot_tune(_tuned())
    assert plt.get_fignums() == before
    assert figure_to_png(fig).startswith(b"\x89PNG")
    assert legibility_problems(fig) == []
