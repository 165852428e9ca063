"""`plot_tune(tuned)`: expected throughput against draft length, one line per batch size, from
`profiles.tune.tune`'s rows, each batch size's best draft length marked. By default the y axis is the
speedup over target-only decoding at that batch size (throughputs of batch 1 and batch 64 differ
by orders of magnitude; speedups share one axis), with the break-even line at 1;
`relative=False` draws throughput itself.
Draws a `Figure` with the kit's palette, no pyplot state; computes nothing itself.
"""
from __future__ import annotations

from matplotlib.figure import Figure

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
