"""Figures for the engine comparison and engine logs (matplotlib). Each returns its Figure, closed
so that a notebook shows it once (as the cell's value), not twice. Knows result objects only."""
from __future__ import annotations

import matplotlib.dates as mdates
import matplotlib.pyplot as plt


def plot_comparison(cmp, ax=None, title: str | None = None):
    """Per-position acceptance, reference loop vs engine, with tau in the legend."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(6, 3.4))
    R, E = cmp.reference, cmp.engine
    pos = list(range(len(R.per_position_acceptance)))
    w = 0.38
    ax.bar([p - w / 2 for p in pos], R.per_position_acceptance, w,
           label=f"reference loop (tau {R.accept_length:.2f})", color="#4c72b0")
    if E is not None:
        ax.bar([p + w / 2 for p in pos], E.per_position_acceptance, w,
               label=f"engine (tau {E.accept_length:.2f})", color="#dd8452")
    ax.set_xticks(pos)
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance (of all cycles)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title(title or cmp.verdict_kind)
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot_log(parsed, ax=None, title: str = "engine log: acceptance over time"):
    """Acceptance length per log line over time (line number when the log has no timestamps);
    vLLM lines also show each position's acceptance rate."""
    df = parsed.df
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7, 3.4))
    if df.empty:
        ax.text(0.5, 0.5, "no acceptance lines in the log", ha="center", va="center")
        plt.close(fig)
        return fig
    use_time = bool(df["time"].notna().all())
    x = df["time"] if use_time else df["line_no"]
    ax.plot(x, df["accept_length"], "o-", color="black", label="accept length (tau)")
    ax.set_ylabel("accept length")
    ax.set_xlabel("time (as logged)" if use_time else "log line")
    if use_time:
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    pp = [p if isinstance(p, list) else None for p in df["per_position"]]
    k = max((len(p) for p in pp if p), default=0)
    ax.set_ylim(1, max(k + 1, float(df["accept_length"].max()) + 0.5))    # tau lies in 1..k+1
    if any(pp):
        ax2 = ax.twinx()
        for i in range(k):
            ax2.plot(x, [p[i] if p and i < len(p) else float("nan") for p in pp], ".--",
                     alpha=0.7, label=f"position {i}")
        ax2.set_ylim(0, 1)
        ax2.set_ylabel("per-position acceptance")
        ax2.legend(fontsize=7, loc="lower right")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title)
    fig.autofmt_xdate()
    fig.tight_layout()
    plt.close(fig)
    return fig
