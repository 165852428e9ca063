"""`plot_tune(tuned)`: expected throughput against draft length, one line per batch size, from
`profiles.tune.tune`'s rows, each batch size's best draft length marked. By default the y axis is the
speedup over target-only decoding at that batch size (throughputs of batch 1 and batch 64 differ
by orders of magnitude; speedups share one axis), with the break-even line at 1;
`relative=False` draws throughput itself.
`plot_engine_throughput(record)`: what an engine measured at each draft length (the record
benchmarks/vllm_tune.py writes), beside tune's prediction for it.
Draws a `Figure` with the kit's palette, no pyplot state; computes nothing itself.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from eagle_nb.io.engine_throughput import speedups
from eagle_nb.views.palette import FONT, GUIDE_COLOR, new_axes, position_colors, style_axes


def plot_tune(tuned, ax=None, relative: bool = True, title: str | None = None) -> Figure:
    """`tuned`: a `profiles.tune.Tuned` (rows and best k per batch size)."""
    fig, (ax,) = new_axes(ax)
    sizes = sorted(tuned.best)
    for color, b in zip(position_colors(len(sizes)), sizes):
        rows = tuned.at(b)
        ys = [r.speedup if relative else r.throughput for r in rows]
        ax.plot([r.k for r in rows], ys, marker="o", color=color, label=f"batch {b}")
        best = tuned.best[b]
        for r, y in zip(rows, ys):
            if r.k == best:
                ax.plot([r.k], [y], marker="*", ms=13, color=color, ls="none")
    if relative:
        ax.axhline(1.0, color=GUIDE_COLOR, ls="--", lw=1, label="target-only decoding")
        ax.set_ylabel("speedup over target-only")
    else:
        ax.set_ylabel(f"throughput (tokens per {tuned.unit})")
    ax.set_xlabel("draft length k (num_speculative_tokens)")
    ks = sorted({r.k for r in tuned.rows})
    ax.set_xticks(ks)
    ax.set_title(title or "expected throughput by draft length (star: best k)")
    ax.legend(fontsize=FONT, frameon=False)
    style_axes(ax)
    return fig


def plot_engine_throughput(record, ax=None, title: str | None = None) -> Figure:
    """An engine's measured speedup over no speculation against draft length, one solid line per batch
    size, what `tune` predicted for it dashed beside it, the measured best k starred, and the
    no-speculation line at 1. `record`: `io.engine_throughput.read_engine_throughput`'s dict."""
    speedup_rows = speedups(record)
    fig, (ax,) = new_axes(ax)
    for color, (b, rows) in zip(position_colors(len(speedup_rows)), speedup_rows.items()):
        ks = [k for k, _, _ in rows]
        ax.plot(ks, [m for _, m, _ in rows], marker="o", color=color, label=f"batch {b}, measured")
        ax.plot(ks, [p for _, _, p in rows], ls="--", color=color, alpha=0.7, label=f"batch {b}, tune's prediction")
        k_best, m_best, _ = max(rows, key=lambda r: r[1])
        ax.plot([k_best], [m_best], marker="*", ms=13, color=color, ls="none")
    ax.axhline(1.0, color=GUIDE_COLOR, ls=":", lw=1, label="no speculation (k = 0)")
    ax.set_xlabel("draft length k (num_speculative_tokens)")
    ax.set_ylabel("throughput / throughput without speculation")
    ax.set_xticks(sorted({k for rows in speedup_rows.values() for k, _, _ in rows}))
    ax.set_title(title or f"{record.get('pair', 'pair')} on the engine: measured (star: best k) and predicted")
    ax.legend(fontsize=FONT, frameon=False)
    style_axes(ax)
    return fig
