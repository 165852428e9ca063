"""The kit's one plotting convention: colours, line styles, font size, figure sizes, and the small
helpers every figure of `eagle_nb.views` is built with.

- Colours: healthy is one colour everywhere; each registered fault has its own, by its position in
  the registry (`experiment.faults.FAULTS`), so a new fault gets a colour without touching this file;
  accepted / rejected / never-checked / bonus cells of a trace; published references grey dashed.
- Sizes: figures are drawn at `DPI` for a shown width of `SHOWN_WIDTH_PX` (a notebook output area,
  a report) with text no smaller than `FONT` points, so what is shown is legible at natural size.
- Figures are `matplotlib.figure.Figure`s built directly, never through pyplot: nothing is drawn
  globally, nothing is displayed, every figure can be rendered headless (`figure_to_png`).

Knows the fault registry's names and order only; draws nothing itself, reads no file.
"""
from __future__ import annotations

import base64
import io
import zlib

from matplotlib.figure import Figure

from eagle_nb.experiment import faults as registry

# -- colours -------------------------------------------------------------------------------------
HEALTHY_COLOR = "#1565c0"
# One colour per registered fault, by registry position (wrapping past the end); a label that is not
# a registered fault (a combination 'a + b', a custom name) gets one by a stable hash of its text.
FAULT_PALETTE = ("#8d6e63", "#ad1457", "#6d4c41", "#f9a825", "#283593", "#558b2f", "#00838f",
                 "#4e342e", "#d81b60", "#5e35b1", "#9e9d24", "#bf360c", "#8e24aa", "#4527a0",
                 "#ff7043", "#ef6c00", "#c62828", "#2e7d32", "#00897b", "#6a1b9a", "#827717",
                 "#0097a7", "#7cb342", "#e64a19", "#3949ab", "#a1887f", "#f06292", "#004d40")
PALETTE = FAULT_PALETTE   # (the panel's faults keep the colours the figures have always used)
ACCEPT_COLOR, REJECT_COLOR = "#4caf50", "#e53935"        # a draft the target accepted / rejected
UNREACHED_COLOR, BONUS_COLOR = "#e0e0e0", "#64b5f6"      # never checked / the target's own token
NEUTRAL_COLOR = "#90a4ae"      # what a figure does not single out (other hypotheses, other layers)
HIGHLIGHT_COLOR = "#ff9800"    # what it does (the EAGLE-3 layers)
GUIDE_COLOR = "#9e9e9e"        # bounds and floors drawn for orientation (k+1, tau = 1)
DATA_COLOR = "#1e88e5"         # a single series that is neither healthy nor a fault (d2t offsets)
LOOP_COLOR, ENGINE_COLOR = "#3949ab", "#f57c00"          # the kit's reference loop vs a real engine
POSITION_CMAP = "viridis"      # series that are draft positions 1..k

REFERENCE_STYLE = {"color": "#757575", "ls": "--", "lw": 1.2, "ms": 4, "mfc": "white"}
REFERENCE_MARKERS = ("s", "^", "D", "v")
# A setting's style: colour by its faults; line style, marker and bar hatch by its temperature; a
# tree in a tint of its faults' colour (bars dotted), so healthy at T=0, T=1 and as a tree differ.
TEMPERATURE_STYLE = {0.0: ("-", "o", ""), 1.0: ("--", "v", "///")}   # line style, marker, hatch
OTHER_TEMPERATURE_STYLE = (":", "x", "xx")
TREE_HATCH, TINT = "..", 0.45     # a tree's bar hatch; share of white in a tint

# -- sizes ---------------------------------------------------------------------------------------
DPI = 96                # PNG pixels per inch: shown at natural size, 1 pt of text = 1 pt on screen
SHOWN_WIDTH_PX = 900    # the width figures are drawn for (a notebook output area, a report)
FONT = 8.5              # smallest text the figures use (legends, cells, ticks), in points
WRAP = 9                # characters per line of a token label in a trace cell (two lines at most)


def fault_color(name: str) -> str:
    """The colour of a registered fault (by its position in `FAULTS`), or healthy's colour.
    A name that is not registered is a KeyError naming the registered ones."""
    if name == registry.HEALTHY:
        return HEALTHY_COLOR
    if name not in registry.ORDER:
        raise KeyError(f"{name!r} is not a registered fault; known: {', '.join(registry.ORDER)}")
    return FAULT_PALETTE[registry.ORDER[name] % len(FAULT_PALETTE)]


def label_parts(label: str) -> tuple[str, bool, float]:
    """(faults, is a tree, temperature) of a setting label as `Setting.label` and
    `Sweep.curve_name` write it: 'fc-bypass + d2t-absolute', 'healthy, layers [2, 4, 5]',
    'healthy, tree topk 2, 6 nodes', 'healthy, chain', 'fc-bypass, T=1'. The faults come before
    the first ', ' (fault names and combinations never hold one); no 'T=' means T = 0."""
    faults, _, rest = label.partition(", ")
    T = rest.rsplit("T=", 1)[1] if "T=" in rest else "0"
    try:
        temperature = float(T)
    except ValueError:
        temperature = 0.0
    return faults, rest.startswith("tree ") or ", tree " in rest, temperature


def color(label: str) -> str:
    """The kit's colour for a setting label: its faults' colour, whatever follows them ('healthy',
    'fc-bypass', 'a + b', '..., T=1', '..., tree topk 2, 6 nodes'). A label that is not a registered
    fault (a combination, a custom name) gets a palette colour by a stable hash of its text."""
    faults = label_parts(label)[0]
    if faults == registry.HEALTHY or faults in registry.ORDER:
        return fault_color(faults)
    return FAULT_PALETTE[zlib.crc32(faults.encode()) % len(FAULT_PALETTE)]


def tint(c: str, white: float = TINT) -> str:
    """A colour mixed with `white` parts of white (a lighter shade of the same hue)."""
    from matplotlib.colors import to_hex, to_rgb
    return to_hex([x + (1 - x) * white for x in to_rgb(c)])


def setting_style(label: str) -> dict:
    """Everything that tells a setting apart in a figure, from its label: `color` (its faults),
    `ls` / `marker` / `hatch` (its temperature), and for a tree a tinted `face` with dotted bars.
    `line_style` and `bar_style` pick from it."""
    _, tree, T = label_parts(label)
    ls, marker, hatch = TEMPERATURE_STYLE.get(T, OTHER_TEMPERATURE_STYLE)
    c = color(label)
    hatch = hatch + (TREE_HATCH if tree else "")
    return {"color": c, "face": tint(c) if hatch else c, "ls": ls, "marker": marker, "hatch": hatch,
            "tree": tree}


def line_style(name: str) -> dict:
    """Plot keywords of a setting's line: colour from its faults (tinted for a tree), line style
    and marker from its temperature ('..., T=1')."""
    st = setting_style(name)
    return {"color": st["face"] if st["tree"] else st["color"], "ls": st["ls"], "marker": st["marker"]}


def bar_style(name: str) -> dict:
    """Bar keywords of a setting: edged in its faults' colour; filled with it at T = 0 as a chain,
    else with a tint hatched by temperature (T = 1: '///') and shape (tree: '..')."""
    st = setting_style(name)
    return {"color": st["face"], "edgecolor": st["color"], "hatch": st["hatch"] or None,
            "linewidth": 0.8}


def position_colors(k: int) -> list:
    """k colours for draft positions 1..k, dark to light along one sequential map."""
    from matplotlib import colormaps
    cmap = colormaps[POSITION_CMAP]
    return [cmap(i / max(k - 1, 1) * 0.85) for i in range(k)]


# -- figures and axes ------------------------------------------------------------------------------
def new_figure(size) -> Figure:
    """A constrained-layout figure at the kit's DPI (never wider than shown)."""
    return Figure(figsize=(min(size[0], SHOWN_WIDTH_PX / DPI), size[1]), dpi=DPI, layout="constrained")


def new_axes(ax, ncols: int = 1, size=(5.0, 3.2)):
    """(figure, list of axes): the caller's axis, or a new constrained-layout figure with `ncols`
    axes of `size` inches each."""
    if ax is not None:
        return ax.figure, [ax]
    fig = new_figure((size[0] * ncols, size[1]))
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def style_axes(ax) -> None:
    """The kit's font sizes on one axis: ticks at FONT, labels a little larger, title larger."""
    ax.tick_params(labelsize=FONT)
    ax.xaxis.label.set_fontsize(FONT + 0.5)
    ax.yaxis.label.set_fontsize(FONT + 0.5)
    ax.title.set_fontsize(FONT + 1)


def figure_legend(fig, axes, ncols: int = 2) -> None:
    """One legend for the figure, below the axes (never over the data), entries unique by label."""
    seen: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncols=ncols,
                   fontsize=FONT, frameon=False)


def finish_tau_figure(fig, tau_ax, pos_ax, title=None) -> Figure:
    """The right half of a "τ per X | per-position acceptance" figure: the per-position axis
    labelled the vLLM way (P(draft i accepted)), both axes in the kit's fonts, the title above."""
    pos_ax.set(xlabel="draft position", ylabel="P(accepted)", ylim=(0, 1.05),
               title="per-position acceptance (vLLM)")
    pos_ax.xaxis.get_major_locator().set_params(integer=True)
    for ax in (tau_ax, pos_ax):
        style_axes(ax)
    if title:
        fig.suptitle(plain(title), fontsize=FONT + 1.5)
    return fig


def plain(s: str) -> str:
    """Text drawn as is: `$` escaped so matplotlib does not read it as mathtext."""
    return s.replace("$", r"\$")


# -- tokens as text --------------------------------------------------------------------------------
def token_text(tokenizer, i: int) -> str:
    """One token as text; a byte-level piece that does not decode alone shows as its vocab entry."""
    if tokenizer is None:
        return str(i)
    s = tokenizer.decode([i])
    return tokenizer.convert_ids_to_tokens(i) if "\ufffd" in s else s


# -- output ----------------------------------------------------------------------------------------
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
