"""Figures and display tables of speculation results: what the notebooks, panels and reports show
of acceptance (per position, vs depth, log lines) and of single draft-vs-target traces.

Every function takes `RunResult`s by name or `Sweep.curves()` and returns a `matplotlib.figure.Figure` or a pandas DataFrame.
Figures are built on `Figure` directly, never through pyplot: nothing is drawn globally, nothing is
displayed, so every function runs headless and its figure can be embedded (`figure_to_png`).

Published reference numbers (docs/metrics.md) live here as constants, with their source,
so every plot of measured acceptance can draw them beside the measurement.

Draws only: reads no file, runs no model, knows nothing about widgets or reports.
"""
from __future__ import annotations

import base64
import io

import pandas as pd
from matplotlib.figure import Figure

# -- published reference curves (docs/metrics.md) ---------------------------------------
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

# -- one palette for the kit: healthy one colour, each fault its own, published references grey ---
HEALTHY_COLOR = "#1565c0"
FAULT_COLORS = {"layers0-keys-dropped": "#8d6e63", "d2t-absolute": "#8e24aa",
                "wrapper-capture": "#ef6c00", "fc-bypass": "#c62828", "layer-ids+1": "#2e7d32",
                "layer-ids-1": "#00897b"}
_MORE = ("#ad1457", "#6d4c41", "#f9a825", "#283593", "#558b2f", "#00838f", "#4e342e", "#d81b60",
         "#5e35b1", "#9e9d24")      # faults registered later, and combinations: stable by name
REFERENCE_STYLE = {"color": "#757575", "ls": "--", "lw": 1.2, "ms": 4, "mfc": "white"}
REFERENCE_MARKERS = ("s", "^", "D", "v")
TEMPERATURE_STYLE = {0.0: ("-", "o"), 1.0: ("--", "v")}   # line style and marker per temperature

DPI = 96                # PNG pixels per inch: shown at natural size, 1 pt of text = 1 pt on screen
SHOWN_WIDTH_PX = 900    # the width figures are drawn for (a notebook output area, a report)
FONT = 8.5              # smallest text the figures use (legends, cells, ticks), in points
WRAP = 9                # characters per line of a token label in a trace cell (two lines at most)


def color(label: str) -> str:
    """The kit's colour for a setting label ('healthy', 'fc-bypass', 'a + b', '... , T=1')."""
    import zlib
    label = label.split(", T=")[0].split(", layers")[0]
    if label == "healthy":
        return HEALTHY_COLOR
    if label in FAULT_COLORS:
        return FAULT_COLORS[label]
    return _MORE[zlib.crc32(label.encode()) % len(_MORE)]


def line_style(name: str) -> dict:
    """Colour from the label, line style and marker from the temperature ('..., T=1')."""
    T = float(name.rsplit("T=", 1)[1]) if ", T=" in name else 0.0
    ls, marker = TEMPERATURE_STYLE.get(T, (":", "x"))
    return {"color": color(name), "ls": ls, "marker": marker}


# -- small helpers ---------------------------------------------------------------------------------
def new_axes(ax, ncols: int = 1, size=(5.0, 3.2)):
    """(figure, list of axes): the caller's axis, or a new constrained-layout figure."""
    if ax is not None:
        return ax.figure, [ax]
    fig = new_figure((size[0] * ncols, size[1]))
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def new_figure(size) -> Figure:
    """A constrained-layout figure at the kit's DPI and font sizes (never wider than shown)."""
    fig = Figure(figsize=(min(size[0], SHOWN_WIDTH_PX / DPI), size[1]), dpi=DPI, layout="constrained")
    return fig


def style_axes(ax) -> None:
    ax.tick_params(labelsize=FONT)
    ax.xaxis.label.set_fontsize(FONT + 0.5)
    ax.yaxis.label.set_fontsize(FONT + 0.5)
    ax.title.set_fontsize(FONT + 1)


def _text(s: str, width: int = WRAP) -> str:
    """A token for display: escapes visible, wrapped to two lines of `width`; a longer token ends
    in '…' (the figure's caption says so). `$` escaped so matplotlib does not read mathtext."""
    s = repr(s)[1:-1]
    if len(s) > 2 * width:
        s = s[:2 * width - 1] + "…"
    s = s if len(s) <= width else s[:width] + "\n" + s[width:]
    return s.replace("$", r"\$")


def _line(s: str, width: int = WRAP) -> str:
    """A token on one line of `width` characters ('…' when cut)."""
    s = repr(s)[1:-1]
    s = s if len(s) <= width else s[:width - 1] + "…"
    return s.replace("$", r"\$")


def _label(name: str, m) -> str:
    return f"{name} (τ={m.accept_length:.2f})".replace("$", r"\$")


MIN_TRIED = 5   # n-alpha points resting on fewer verify steps than this are not drawn (noise)


def _alpha_points(m, min_tried: int = MIN_TRIED) -> list[tuple[int, float]]:
    """(draft position, conditional alpha) where enough steps reached that position to estimate it.
    Position i+1 (1-based, EAGLE's n = i) is reached by steps accepting >= i drafts."""
    return [(i + 1, a) for i, a in enumerate(m.conditional_alpha)
            if a is not None and sum(m.accept_counts[i:]) >= min_tried]


def figure_to_png(fig: Figure, dpi: int = DPI) -> bytes:
    """PNG bytes of a figure (Agg canvas; no pyplot, no display)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def figure_to_data_uri(fig: Figure, dpi: int = DPI) -> str:
    """`data:image/png;base64,...`, for self-contained HTML."""
    return png_data_uri(figure_to_png(fig, dpi))


# -- acceptance (notebooks 01, 03, 04): {name: RunResult} and {name: {k: RunResult}} ------------
def metrics_table(results: dict) -> pd.DataFrame:
    """Every acceptance metric (metrics.METRICS), one column per named RunResult."""
    from eagle_nb.experiment.results import metrics_frame
    return metrics_frame(results)


def tau_table(curves: dict) -> pd.DataFrame:
    """tau per depth (rows) and curve (columns). `curves`: {name: {k: RunResult}} (Sweep.curves)."""
    return pd.DataFrame({name: {k: round(r.metrics.accept_length, 3) for k, r in sorted(c.items())}
                         for name, c in curves.items()}).rename_axis("depth k")


def log_lines(results: dict) -> pd.DataFrame:
    """The decode log lines SGLang (both accept-rate formulas) and vLLM would print per setting."""
    from eagle_nb.loop.metrics import sglang_log_line, vllm_log_line
    rows = []
    for name, r in results.items():
        m = r.metrics
        rows.append({"setting": name, "SGLang (len/(k+1))": sglang_log_line(m, "by_draft_tokens"),
                     "SGLang (accepted/drafted)": sglang_log_line(m, "by_drafts"),
                     "vLLM": vllm_log_line(m)})
    return pd.DataFrame(rows).set_index("setting")


def _legend(fig, axes, ncols: int = 2) -> None:
    """One legend for the figure, below the axes (never over the data), entries unique by label."""
    seen: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=ncols,
                   fontsize=FONT, frameon=False)


def plot_acceptance(results: dict, title: str | None = None) -> Figure:
    """Several settings side by side: unconditional per-position acceptance (vLLM), conditional
    n-alpha (EAGLE), and the accepted-count histogram (gpt-fast / SGLang). `results`:
    {name: RunResult}; depths may differ between settings. x axes count draft positions from 1."""
    fig, (a, b, c) = new_axes(None, ncols=3, size=(3.1, 3.3))
    n = max(len(results), 1)
    width = 0.8 / n
    for j, (name, r) in enumerate(results.items()):
        m, col = r.metrics, color(name)
        pos = [i + 1 + (j - (n - 1) / 2) * width for i in range(m.depth)]
        a.bar(pos, m.per_position_acceptance, width=width, color=col, label=_label(name, m))
        alpha = _alpha_points(m)
        b.plot([p for p, _ in alpha], [x for _, x in alpha], "o-", color=col, label=_label(name, m))
        hist_pos = [i + (j - (n - 1) / 2) * width for i in range(m.depth + 1)]
        c.bar(hist_pos, m.accept_histogram, width=width, color=col, label=_label(name, m))
    a.set(xlabel="draft position", ylabel="P(accepted)", ylim=(0, 1.05),
          title="per-position acceptance\n(vLLM, unconditional)")
    b.set(xlabel="draft position (EAGLE's n + 1)", ylabel="P(accept | earlier accepted)",
          ylim=(0, 1.05), title=f"conditional n-α (EAGLE)\npositions reached ≥{MIN_TRIED}×")
    c.set(xlabel="drafts accepted per verify step", ylabel="fraction of steps", ylim=(0, 1.05),
          title="accepted-count histogram\n(gpt-fast, SGLang)")
    for ax in (a, b, c):
        ax.xaxis.get_major_locator().set_params(integer=True)
        style_axes(ax)
    _legend(fig, [a], ncols=min(n, 3))
    if title:
        fig.suptitle(title.replace("$", r"\$"), fontsize=FONT + 1.5)
    return fig


def _plot_references(ax, refs: dict, x_from: int = 0) -> None:
    """Published curves in the neutral reference style, labelled with their conditions."""
    for (name, ref), mk in zip(refs.items(), REFERENCE_MARKERS):
        xs = list(ref) if isinstance(ref, dict) else [x_from + i for i in range(len(ref))]
        ys = list(ref.values()) if isinstance(ref, dict) else list(ref)
        ax.plot(xs, ys, marker=mk, label=f"published: {name}", **REFERENCE_STYLE)


def plot_tau_vs_depth(curves: dict, reference: bool = True, alpha: bool = True,
                      title: str | None = None, ax=None) -> Figure:
    """Measured tau against draft depth k, with the published chain curves and the bound k+1.
    `curves`: {name: {k: RunResult}} (Sweep.curves). With `alpha`, a second panel shows
    conditional n-alpha at each curve's largest k beside the EAGLE-1 Table 2 values (`ax` only
    without it). Colour = setting, line style = temperature, grey dashed = published."""
    fig, axes = new_axes(None if alpha else ax, ncols=2 if alpha else 1, size=(4.6, 4.8))
    a = axes[0]
    ks_all = sorted({k for c in curves.values() for k in c})
    for name, c in curves.items():
        ks = sorted(c)
        a.plot(ks, [c[k].metrics.accept_length for k in ks], label=name.replace("$", r"\$"),
               **line_style(name))
    if ks_all:
        a.plot(ks_all, [k + 1 for k in ks_all], ":", color="#9e9e9e", label="bound k+1 (all accepted)")
        a.axhline(1.0, color="#9e9e9e", lw=0.8, ls="-.")
    if reference:
        _plot_references(a, REFERENCE_TAU_VS_K)
    a.set(xlabel="draft depth k (chain)", ylabel="τ = mean acceptance length",
          title="acceptance length vs depth")
    a.xaxis.get_major_locator().set_params(integer=True)
    if alpha:
        b = axes[1]
        for name, c in curves.items():
            if not c:
                continue
            m = c[max(c)].metrics
            pts = _alpha_points(m)
            b.plot([p for p, _ in pts], [x for _, x in pts], label=name, **line_style(name))
        if reference:
            _plot_references(b, REFERENCE_N_ALPHA, x_from=1)
        b.set(xlabel="draft position (EAGLE's n + 1)", ylabel="n-α (conditional)", ylim=(0, 1.05),
              title=f"conditional n-α at each curve's largest k\n(positions reached ≥{MIN_TRIED}×)")
        b.xaxis.get_major_locator().set_params(integer=True)
    for each in axes:
        style_axes(each)
    if ax is None:
        _legend(fig, axes, ncols=2)
        fig.suptitle((title or "measured vs published (published: 8B-class targets on MT-bench; "
                      "compare shapes, not levels)").replace("$", r"\$"), fontsize=FONT + 0.5)
    return fig


def plot_per_position(results: dict, ax=None, title: str | None = None) -> Figure:
    """Unconditional per-position acceptance (vLLM's definition) of several settings as lines."""
    fig, (ax,) = new_axes(ax, size=(4.6, 3.4))
    for name, r in results.items():
        m = r.metrics
        ax.plot(range(1, m.depth + 1), m.per_position_acceptance, label=_label(name, m),
                **line_style(name))
    ax.set(xlabel="draft position", ylabel="P(accepted)", ylim=(0, 1.05),
           title=title or "per-position acceptance (vLLM)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    style_axes(ax)
    return fig


def plot_depth_overview(curves: dict, at_k: dict, depth: int) -> Figure:
    """tau vs depth (with the published curves) beside the per-position acceptance at one depth."""
    fig = new_figure((9.3, 4.2))
    a, b = fig.subplots(1, 2)
    plot_tau_vs_depth(curves, alpha=False, ax=a)
    a.axvline(depth, color="k", lw=0.6, ls=":")
    plot_per_position(at_k, ax=b, title=f"per-position acceptance at k={depth}")
    _legend(fig, [a, b], ncols=2)
    return fig


def plot_fault_cost(results: dict, title: str | None = None) -> Figure:
    """Which fault costs how much: tau of every setting at one depth as bars (healthy first, the
    tau = 1 floor of no speculation gain marked), beside each one's per-position acceptance.
    `results`: {label: RunResult} at one depth and temperature (e.g. `Sweep.by_label`)."""
    names = list(results)
    fig, (a, b) = new_axes(None, ncols=2, size=(4.6, 0.32 * len(names) + 2.0))
    taus = [results[n].metrics.accept_length for n in names]
    y = list(range(len(names)))[::-1]
    a.barh(y, taus, color=[color(n) for n in names])
    for yi, t in zip(y, taus):
        a.text(t + 0.03, yi, f"{t:.2f}", va="center", fontsize=FONT)
    a.axvline(1.0, color="#9e9e9e", ls="-.", lw=0.8)
    a.set_yticks(y, [n.replace("$", r"\$") for n in names])
    a.set(xlabel="τ (mean acceptance length; 1 = no gain)", xlim=(0, max(taus + [1.0]) * 1.18),
          title="τ per fault")
    for n in names:
        m = results[n].metrics
        b.plot(range(1, m.depth + 1), m.per_position_acceptance, label=n, **line_style(n))
    b.set(xlabel="draft position", ylabel="P(accepted)", ylim=(0, 1.05),
          title="per-position acceptance (vLLM)")
    b.xaxis.get_major_locator().set_params(integer=True)
    for ax in (a, b):
        style_axes(ax)
    if title:
        fig.suptitle(title.replace("$", r"\$"), fontsize=FONT + 1.5)
    return fig


# -- draft-vs-target traces ------------------------------------------------------------------------
def token_text(tokenizer, i: int) -> str:
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
            marks.append(f"{flag}{token_text(tokenizer, t)!r}")
        marks += ["·(not computed)"] * (st.depth - len(step.draft_tokens))   # one pass: after a rejection
        kind = "correction" if a < len(step.draft_tokens) else "bonus"
        rows.append({"step": n, "accepted": a, "drafts": "  ".join(marks),
                     "target token": f"{token_text(tokenizer, step.target_tokens[a])!r} ({kind})"})
    return pd.DataFrame(rows).set_index("step")


def plot_trace(result, tokenizer=None, prompt: int = 0, max_steps: int = 16) -> Figure:
    """Draft-vs-target grid for one prompt: a row per verify step, a column per draft position.
    Green = accepted, red = first rejection (the target's token underneath), grey = never checked,
    blue column = the target's bonus or correction token. Tokens wrap to two lines; a longer one
    ends in '…' (said in the caption)."""
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    st = result.stats[prompt]
    steps = st.steps[:max_steps]
    k = st.depth
    grid = np.zeros((max(len(steps), 1), k + 1))
    fig, (ax,) = new_axes(None, size=(min(1.05 * (k + 1) + 1.2, 9.3), 0.42 * len(steps) + 1.9))
    cut = False
    for r, s in enumerate(steps):
        for c in range(k):
            grid[r, c] = 1 if c < s.accepted else (2 if c == s.accepted else 0)
            if c >= len(s.draft_tokens):      # one pass: drafts after a rejection are not computed
                continue
            label = _text(token_text(tokenizer, s.draft_tokens[c]))
            if c == s.accepted:     # the target's token at the rejection, shown after an arrow
                label = f"{_line(token_text(tokenizer, s.draft_tokens[c]))}\n→" \
                        f"{_line(token_text(tokenizer, s.target_tokens[c]))}"
            cut |= "…" in label
            ax.text(c, r, label, ha="center", va="center", fontsize=FONT, linespacing=0.95)
        grid[r, k] = 3
        label = _text(token_text(tokenizer, s.target_tokens[s.accepted]))
        cut |= "…" in label
        ax.text(k, r, label, ha="center", va="center", fontsize=FONT, linespacing=0.95)
    cmap = ListedColormap([UNREACHED_COLOR, ACCEPT_COLOR, REJECT_COLOR, BONUS_COLOR])
    ax.imshow(grid, cmap=cmap, vmin=0, vmax=3, aspect="auto")
    ax.set_xticks(range(k + 1), [f"d{i + 1}" for i in range(k)] + ["target"])
    ax.set_yticks(range(len(steps)))
    ax.set_ylabel("verify step")
    n_acc = sum(s.accepted for s in steps)
    ax.set_title(f"{result.label}: draft vs target, prompt {prompt}\n{n_acc} of {k * len(steps)} "
                 f"drafts accepted in {len(steps)} steps" + (" (… = token cut to fit)" if cut else ""))
    style_axes(ax)
    handles = [Patch(color=ACCEPT_COLOR, label="accepted"),
               Patch(color=REJECT_COLOR, label="rejected (→ target's token)"),
               Patch(color=UNREACHED_COLOR, label="never checked"),
               Patch(color=BONUS_COLOR, label="target adds (bonus/correction)")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=FONT, frameon=False)
    return fig
