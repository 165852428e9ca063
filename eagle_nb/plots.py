"""Figures and display tables of speculation results: what the notebooks, panels and reports show
of acceptance (per position, vs depth, log lines) and of single draft-vs-target traces.

Every function takes `RunResult`s by name or `Sweep.curves()` and returns a `matplotlib.figure.Figure` or a pandas DataFrame.
Figures are built on `Figure` directly, never through pyplot: nothing is drawn globally, nothing is
displayed, so every function runs headless and its figure can be embedded (`figure_to_png`).

Published reference numbers (reference/anchors.md §1.4) live here as constants, with their source,
so every plot of measured acceptance can draw them beside the measurement.

Draws only: reads no file, runs no model, knows nothing about widgets or reports.
"""
from __future__ import annotations

import base64
import io

import pandas as pd
from matplotlib.figure import Figure


# -- published reference curves (reference/anchors.md §1.4) ---------------------------------------
# vLLM chain drafts, mean acceptance length (tau, bonus included) vs K; vllm-project/vllm#20780.
REFERENCE_TAU_VS_K = {
    "vLLM EAGLE-3 chain, Llama-3.1-8B, MT-bench, T=0":
        {2: 2.36, 3: 2.79, 4: 3.08, 5: 3.32, 6: 3.46, 7: 3.54},
    "vLLM EAGLE-1 chain, Llama-3.1-8B, MT-bench, T=0":
        {2: 2.10, 3: 2.29, 4: 2.39, 5: 2.43, 6: 2.45, 7: 2.47},
}
# EAGLE-1 paper (arXiv 2401.15077) Table 2: conditional n-alpha of chain drafts, MT-bench.
REFERENCE_N_ALPHA = {
    "EAGLE-1 Vicuna 7B, T=0": [0.79, 0.74, 0.72, 0.73, 0.67],
    "EAGLE-1 Vicuna 7B, T=1": [0.71, 0.68, 0.66, 0.66, 0.65],
}

ACCEPT_COLOR, REJECT_COLOR, UNREACHED_COLOR, BONUS_COLOR = "#4caf50", "#e53935", "#e0e0e0", "#64b5f6"


# -- small helpers ---------------------------------------------------------------------------------
def _axes(ax, ncols: int = 1, size=(5.0, 3.2)):
    """(figure, list of axes): the caller's axis, or a new constrained-layout figure."""
    if ax is not None:
        return ax.figure, [ax]
    fig = Figure(figsize=(size[0] * ncols, size[1]), layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _text(s: str, width: int = 10) -> str:
    """A token for display: escapes visible, `$` escaped so matplotlib does not read mathtext."""
    s = repr(s)[1:-1]
    s = s if len(s) <= width else s[:width - 1] + "…"
    return s.replace("$", r"\$")


def _label(name: str, m) -> str:
    return f"{name} (τ={m.accept_length:.2f})".replace("$", r"\$")


MIN_TRIED = 5   # n-alpha points resting on fewer verify steps than this are not drawn (noise)


def _alpha_points(m, min_tried: int = MIN_TRIED) -> list[tuple[int, float]]:
    """(position, conditional alpha) where enough steps reached that position to estimate it.
    Steps that reached position i (all of 0..i-1 accepted) = steps accepting >= i drafts."""
    return [(i, a) for i, a in enumerate(m.conditional_alpha)
            if a is not None and sum(m.accept_counts[i:]) >= min_tried]


def figure_to_png(fig: Figure, dpi: int = 80) -> bytes:
    """PNG bytes of a figure (Agg canvas; no pyplot, no display)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def figure_to_data_uri(fig: Figure, dpi: int = 80) -> str:
    """`data:image/png;base64,...`, for self-contained HTML."""
    return "data:image/png;base64," + base64.b64encode(figure_to_png(fig, dpi)).decode("ascii")


# -- acceptance (notebooks 01, 03, 04): {name: RunResult} and {name: {k: RunResult}} ------------
def metrics_table(results: dict) -> pd.DataFrame:
    """Every acceptance metric (metrics.METRICS), one column per named RunResult."""
    from .results import metrics_frame
    return metrics_frame(results)


def tau_table(curves: dict) -> pd.DataFrame:
    """tau per depth (rows) and curve (columns). `curves`: {name: {k: RunResult}} (Sweep.curves)."""
    return pd.DataFrame({name: {k: round(r.metrics.accept_length, 3) for k, r in sorted(c.items())}
                         for name, c in curves.items()}).rename_axis("depth k")


def log_lines(results: dict) -> pd.DataFrame:
    """The decode log lines SGLang (both accept-rate formulas) and vLLM would print per setting."""
    from .metrics import sglang_log_line, vllm_log_line
    rows = []
    for name, r in results.items():
        m = r.metrics
        rows.append({"setting": name, "SGLang (len/(k+1))": sglang_log_line(m, "by_draft_tokens"),
                     "SGLang (accepted/drafted)": sglang_log_line(m, "by_drafts"),
                     "vLLM": vllm_log_line(m)})
    return pd.DataFrame(rows).set_index("setting")


def plot_acceptance(results: dict, title: str | None = None) -> Figure:
    """Several settings side by side: unconditional per-position acceptance (vLLM), conditional
    n-alpha (EAGLE), and the accepted-count histogram (gpt-fast / SGLang). `results`:
    {name: RunResult}; depths may differ between settings."""
    fig, (a, b, c) = _axes(None, ncols=3, size=(4.0, 3.2))
    n = max(len(results), 1)
    width = 0.8 / n
    for j, (name, r) in enumerate(results.items()):
        m = r.metrics
        pos = [i + 1 + (j - (n - 1) / 2) * width for i in range(m.depth)]
        a.bar(pos, m.per_position_acceptance, width=width, label=_label(name, m))
        alpha = _alpha_points(m)
        b.plot([p + 1 for p, _ in alpha], [x for _, x in alpha], "o-", label=_label(name, m))
        hist_pos = [i + (j - (n - 1) / 2) * width for i in range(m.depth + 1)]
        c.bar(hist_pos, m.accept_histogram, width=width, label=_label(name, m))
    a.set(xlabel="draft position", ylabel="P(accepted)", ylim=(0, 1.05),
          title="per-position acceptance (vLLM)")
    b.set(xlabel="draft position n+1", ylabel="P(accept | all before accepted)", ylim=(0, 1.05),
          title=f"conditional n-alpha (EAGLE; positions reached ≥{MIN_TRIED}×)")
    b.xaxis.get_major_locator().set_params(integer=True)
    c.set(xlabel="drafts accepted in a verify step", ylabel="fraction of steps", ylim=(0, 1.05),
          title="accepted-count histogram")
    for ax in (a, b, c):
        ax.title.set_fontsize(9)
    a.legend(fontsize=7)
    if title:
        fig.suptitle(title.replace("$", r"\$"), fontsize=10)
    return fig


def plot_tau_vs_depth(curves: dict, reference: bool = True, alpha: bool = True,
                      title: str | None = None, ax=None) -> Figure:
    """Measured tau against draft depth k, with the published chain curves and the bound k+1.
    `curves`: {name: {k: RunResult}} (Sweep.curves). With `alpha`, a second panel shows
    conditional n-alpha at each curve's largest k beside the EAGLE-1 Table 2 values (`ax` only
    without it)."""
    fig, axes = _axes(None if alpha else ax, ncols=2 if alpha else 1, size=(5.2, 3.6))
    a = axes[0]
    ks_all = sorted({k for c in curves.values() for k in c})
    for name, c in curves.items():
        ks = sorted(c)
        taus = [c[k].metrics.accept_length for k in ks]
        a.plot(ks, taus, "o-", label=name.replace("$", r"\$"))
    if ks_all:
        a.plot(ks_all, [k + 1 for k in ks_all], ":", color="gray", label="bound k+1 (all accepted)")
        a.axhline(1.0, color="gray", lw=0.8, ls="--")
    if reference:
        for name, ref in REFERENCE_TAU_VS_K.items():
            a.plot(list(ref), list(ref.values()), "s--", ms=4, alpha=0.6, label=f"published: {name}")
    a.set(xlabel="draft depth k (chain)", ylabel="tau = mean acceptance length",
          title="acceptance length vs depth")
    a.legend(fontsize=6.5)
    if alpha:
        b = axes[1]
        for name, c in curves.items():
            if not c:
                continue
            m = c[max(c)].metrics
            pts = _alpha_points(m)
            b.plot([p for p, _ in pts], [x for _, x in pts], "o-", label=f"{name} (k={m.depth})")
        if reference:
            for name, ref in REFERENCE_N_ALPHA.items():
                b.plot(range(len(ref)), ref, "s--", ms=4, alpha=0.6, label=f"published: {name}")
        b.set(xlabel="n (self-predicted features in the input)", ylabel="n-alpha (conditional)",
              ylim=(0, 1.05), title=f"conditional acceptance by position (reached ≥{MIN_TRIED}×)")
        b.legend(fontsize=6.5)
    for each in axes:
        each.title.set_fontsize(9)
    if ax is None:
        fig.suptitle((title or "measured vs published (published: 8B-class targets on MT-bench; "
                      "compare shapes, not levels)").replace("$", r"\$"), fontsize=8)
    return fig


def plot_per_position(results: dict, ax=None, title: str | None = None) -> Figure:
    """Unconditional per-position acceptance (vLLM's definition) of several settings as lines."""
    fig, (ax,) = _axes(ax, size=(4.6, 3.4))
    for name, r in results.items():
        m = r.metrics
        ax.plot(range(1, m.depth + 1), m.per_position_acceptance, "o-", label=_label(name, m))
    ax.set(xlabel="draft position", ylabel="P(accepted)", ylim=(0, 1.05),
           title=title or "per-position acceptance (vLLM)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    return fig


def plot_depth_overview(curves: dict, at_k: dict, depth: int) -> Figure:
    """tau vs depth (with the published curves) beside the per-position acceptance at one depth."""
    fig = Figure(figsize=(10.4, 3.8), layout="constrained")
    a, b = fig.subplots(1, 2)
    plot_tau_vs_depth(curves, alpha=False, ax=a)
    a.axvline(depth, color="k", lw=0.6, ls=":")
    plot_per_position(at_k, ax=b, title=f"per-position acceptance at k={depth}")
    return fig


# -- draft-vs-target traces ------------------------------------------------------------------------
def _tok(tokenizer, i: int) -> str:
    """One token as text; a byte-level piece that does not decode alone shows as its vocab entry."""
    if tokenizer is None:
        return str(i)
    s = tokenizer.decode([i])
    return tokenizer.convert_ids_to_tokens(i) if "\ufffd" in s else s


def trace_table(result, tokenizer=None, prompt: int = 0, max_steps: int | None = 20) -> pd.DataFrame:
    """One row per verify step of one prompt: the k drafts (✓ accepted, ✗ first rejected, · never
    checked) and the target's token at the first rejected position (its correction) or after the
    last draft (the bonus)."""
    st = result.stats[prompt]
    rows = []
    for n, step in enumerate(st.steps[:max_steps]):
        a = step.accepted
        marks = []
        for i, t in enumerate(step.draft_tokens):
            flag = "✓" if i < a else ("✗" if i == a else "·")
            marks.append(f"{flag}{_tok(tokenizer, t)!r}")
        kind = "correction" if a < len(step.draft_tokens) else "bonus"
        rows.append({"step": n, "accepted": a, "drafts": "  ".join(marks),
                     "target token": f"{_tok(tokenizer, step.target_tokens[a])!r} ({kind})"})
    return pd.DataFrame(rows).set_index("step")


def plot_trace(result, tokenizer=None, prompt: int = 0, max_steps: int = 16) -> Figure:
    """Draft-vs-target grid for one prompt: a row per verify step, a column per draft position.
    Green = accepted, red = first rejection (the target's token underneath), grey = never checked,
    blue column = the target's bonus or correction token."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    st = result.stats[prompt]
    steps = st.steps[:max_steps]
    k = st.depth
    grid = np.zeros((max(len(steps), 1), k + 1))
    fig, (ax,) = _axes(None, size=(min(1.2 * (k + 1) + 1.5, 14), 0.3 * len(steps) + 1.0))
    for r, s in enumerate(steps):
        for c in range(k):
            grid[r, c] = 1 if c < s.accepted else (2 if c == s.accepted else 0)
            label = _text(_tok(tokenizer, s.draft_tokens[c]))
            if c == s.accepted:
                label += "\n→" + _text(_tok(tokenizer, s.target_tokens[c]))
            ax.text(c, r, label, ha="center", va="center", fontsize=7)
        grid[r, k] = 3
        ax.text(k, r, _text(_tok(tokenizer, s.target_tokens[s.accepted])), ha="center",
                va="center", fontsize=7)
    cmap = ListedColormap([UNREACHED_COLOR, ACCEPT_COLOR, REJECT_COLOR, BONUS_COLOR])
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=3, aspect="auto")
    ax.set_xticks(range(k + 1), [f"d{i + 1}" for i in range(k)] + ["target"])
    ax.set_yticks(range(len(steps)))
    ax.set_ylabel("verify step")
    ax.set_title(f"draft vs target, prompt {prompt}: {sum(s.accepted for s in steps)} of "
                 f"{k * len(steps)} drafts accepted in {len(steps)} steps", fontsize=9)
    return fig
