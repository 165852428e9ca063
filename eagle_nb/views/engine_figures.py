"""Figures for the engine comparison and engine logs (notebook 05): the kit's reference loop beside
a real engine, and acceptance over time from a vLLM or SGLang log.

Each takes a result object (`engines.compare`'s comparison, `engines.logs.parse_log`'s parsed log)
and returns a `matplotlib.figure.Figure` in the kit's one convention (`views.palette`), built
without pyplot: nothing is drawn globally, so a notebook shows it once, as the cell's value.
Reads no file, starts no engine.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from eagle_nb.views.palette import (
    ENGINE_COLOR,
    FONT,
    LOOP_COLOR,
    new_axes,
    plain,
    position_colors,
    style_axes,
)


def plot_comparison(cmp, ax=None, title: str | None = None) -> Figure:
    """Per-position acceptance, reference loop vs engine, with tau in the legend."""
    fig, (ax,) = new_axes(ax, size=(6.0, 3.4))
    R, E = cmp.reference, cmp.engine
    pos = list(range(len(R.per_position_acceptance)))
    w = 0.38
    ax.bar([p - w / 2 for p in pos], R.per_position_acceptance, w,
           label=f"reference loop (tau {R.accept_length:.2f})", color=LOOP_COLOR)
    if E is not None:
        ax.bar([p + w / 2 for p in pos], E.per_position_acceptance, w,
               label=f"engine (tau {E.accept_length:.2f})", color=ENGINE_COLOR)
    ax.set_xticks(pos)
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance (of all cycles)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=FONT)
    ax.set_title(plain(title or cmp.verdict_kind))
    style_axes(ax)
    return fig


def plot_log(parsed, ax=None, title: str = "engine log: acceptance over time") -> Figure:
    """Acceptance length per log line over time (line number when the log has no timestamps);
    vLLM lines also show each position's acceptance rate."""
    df = parsed.df
    fig, (ax,) = new_axes(ax, size=(7.0, 3.4))
    ax.set_title(plain(title))
    style_axes(ax)
    if df.empty:
        ax.text(0.5, 0.5, "no acceptance lines in the log", ha="center", va="center", fontsize=FONT)
        return fig
    use_time = bool(df["time"].notna().all())
    x = df["time"] if use_time else df["line_no"]
    ax.plot(x, df["accept_length"], "o-", color="black", label="accept length (tau)")
    ax.set_ylabel("accept length")
    ax.set_xlabel("time (as logged)" if use_time else "log line")
    if use_time:
        import matplotlib.dates as mdates
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
        ax.tick_params(axis="x", labelrotation=30)
    pp = [p if isinstance(p, list) else None for p in df["per_position"]]
    k = max((len(p) for p in pp if p), default=0)
    ax.set_ylim(1, max(k + 1, float(df["accept_length"].max()) + 0.5))    # tau lies in 1..k+1
    if any(pp):
        ax2 = ax.twinx()
        for i, c in enumerate(position_colors(k)):
            ax2.plot(x, [p[i] if p and i < len(p) else float("nan") for p in pp], ".--",
                     color=c, alpha=0.8, label=f"position {i}")
        ax2.set_ylim(0, 1)
        ax2.set_ylabel("per-position acceptance")
        ax2.legend(fontsize=FONT, loc="lower right")
        style_axes(ax2)
    ax.legend(fontsize=FONT, loc="upper left")
    style_axes(ax)
    return fig
