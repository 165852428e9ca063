"""Figures of acceptance: per-position acceptance (vLLM), conditional n-alpha (EAGLE), the
accepted-count histogram (gpt-fast, SGLang), tau against depth beside the published curves, and
what each fault costs (notebooks 01, 03, 04, the panels and the reports).

Every function takes `RunResult`s by name ({name: RunResult}) or `Sweep.curves()`
({name: {k: RunResult}}) and returns a `matplotlib.figure.Figure` in the kit's one convention
(`views.palette`). Published reference numbers (docs/metrics.md) live here as constants, with
their source, so every plot of measured acceptance can draw them beside the measurement.

Draws only: reads no file, runs no model, knows nothing about widgets or reports.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from eagle_nb.views.palette import (
    finish_tau_figure,
    FONT,
    GUIDE_COLOR,
    REFERENCE_MARKERS,
    REFERENCE_STYLE,
    bar_style,
    figure_legend,
    line_style,
    new_axes,
    new_figure,
    plain,
    style_axes,
)

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


def _label(name: str, m) -> str:
    return plain(f"{name} (τ={m.accept_length:.2f})")


MIN_TRIED = 5   # n-alpha points resting on fewer verify steps than this are not drawn (noise)


def _alpha_points(m, min_tried: int = MIN_TRIED) -> list[tuple[int, float]]:
    """(draft position, conditional alpha) where enough steps reached that position to estimate it.
    Position i+1 (1-based, EAGLE's n = i) is reached by steps accepting >= i drafts."""
    return [(i + 1, a) for i, a in enumerate(m.conditional_alpha)
            if a is not None and sum(m.accept_counts[i:]) >= min_tried]


def plot_acceptance(results: dict, title: str | None = None) -> Figure:
    """Several settings side by side: unconditional per-position acceptance (vLLM), conditional
    n-alpha (EAGLE), and the accepted-count histogram (gpt-fast / SGLang). `results`:
    {name: RunResult}, named by setting label (`palette.setting_style`: colour by faults, hatch
    and line style by temperature, tint for a tree); depths may differ between settings. x axes
    count draft positions from 1."""
    fig, (a, b, c) = new_axes(None, ncols=3, size=(3.1, 3.3))
    n = max(len(results), 1)
    width = 0.8 / n
    for j, (name, r) in enumerate(results.items()):
        m, bars = r.metrics, bar_style(name)      # colour by faults, hatch by temperature and shape
        pos = [i + 1 + (j - (n - 1) / 2) * width for i in range(m.depth)]
        a.bar(pos, m.per_position_acceptance, width=width, label=_label(name, m), **bars)
        alpha = _alpha_points(m)
        b.plot([p for p, _ in alpha], [x for _, x in alpha], label=_label(name, m), **line_style(name))
        hist_pos = [i + (j - (n - 1) / 2) * width for i in range(m.depth + 1)]
        c.bar(hist_pos, m.accept_histogram, width=width, label=_label(name, m), **bars)
    a.set(xlabel="draft position", ylabel="P(accepted)", ylim=(0, 1.05),
          title="per-position acceptance\n(vLLM, unconditional)")
    b.set(xlabel="draft position (EAGLE's n + 1)", ylabel="P(accept | earlier accepted)",
          ylim=(0, 1.05), title=f"conditional n-α (EAGLE)\npositions reached ≥{MIN_TRIED}×")
    c.set(xlabel="drafts accepted per verify step", ylabel="fraction of steps", ylim=(0, 1.05),
          title="accepted-count histogram\n(gpt-fast, SGLang)")
    for ax in (a, b, c):
        ax.xaxis.get_major_locator().set_params(integer=True)
        style_axes(ax)
    figure_legend(fig, [a], ncols=min(n, 3))
    if title:
        fig.suptitle(plain(title), fontsize=FONT + 1.5)
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
        a.plot(ks, [c[k].metrics.accept_length for k in ks], label=plain(name),
               **line_style(name))
    if ks_all:
        a.plot(ks_all, [k + 1 for k in ks_all], ":", color=GUIDE_COLOR, label="bound k+1 (all accepted)")
        a.axhline(1.0, color=GUIDE_COLOR, lw=0.8, ls="-.")
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
        figure_legend(fig, axes, ncols=2)
        fig.suptitle(plain(title or "measured vs published (published: 8B-class targets on "
                           "MT-bench; compare shapes, not levels)"), fontsize=FONT + 0.5)
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
    figure_legend(fig, [a, b], ncols=2)
    return fig


def plot_fault_cost(results: dict, title: str | None = None, what: str = "fault") -> Figure:
    """Which fault costs how much: tau of every setting at one depth as bars (healthy first, the
    tau = 1 floor of no speculation gain marked), beside each one's per-position acceptance.
    `results`: {label: RunResult} at one depth and temperature (e.g. `Sweep.by_label`); `what` the
    settings are (faults, or serving conditions in notebook 07)."""
    names = list(results)
    fig, (a, b) = new_axes(None, ncols=2, size=(4.6, 0.32 * len(names) + 2.0))
    taus = [results[n].metrics.accept_length for n in names]
    y = list(range(len(names)))[::-1]
    for yi, n, t in zip(y, names, taus):
        a.barh(yi, t, **bar_style(n))
    for yi, t in zip(y, taus):
        a.text(t + 0.03, yi, f"{t:.2f}", va="center", fontsize=FONT)
    a.axvline(1.0, color=GUIDE_COLOR, ls="-.", lw=0.8)
    a.set_yticks(y, [plain(n) for n in names])
    a.set(xlabel="τ (mean acceptance length; 1 = no gain)", xlim=(0, max(taus + [1.0]) * 1.18),
          title=f"τ per {what}")
    for n in names:
        m = results[n].metrics
        b.plot(range(1, m.depth + 1), m.per_position_acceptance, label=n, **line_style(n))
    return finish_tau_figure(fig, a, b, title)
