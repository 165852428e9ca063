"""Draft-vs-target traces of one prompt: a grid of verify steps by draft positions, each cell
accepted, first rejected (with the target's token) or never checked (notebook 03).

Takes a `RunResult` (its per-prompt `SpecStats`) and an optional tokenizer for the token text;
returns a `matplotlib.figure.Figure` in the kit's one convention (`views.palette`). The same trace
as a table is `views.tables.trace_table`. Draws only: reads no file, runs no model.
"""
from __future__ import annotations

from matplotlib.figure import Figure

from eagle_nb.views.palette import (
    ACCEPT_COLOR,
    BONUS_COLOR,
    FONT,
    REJECT_COLOR,
    UNREACHED_COLOR,
    WRAP,
    new_axes,
    plain,
    style_axes,
    token_text,
)


def _text(s: str, width: int = WRAP) -> str:
    """A token for display: escapes visible, wrapped to two lines of `width`; a longer token ends
    in '…' (the figure's caption says so). `$` escaped so matplotlib does not read mathtext."""
    s = repr(s)[1:-1]
    if len(s) > 2 * width:
        s = s[:2 * width - 1] + "…"
    s = s if len(s) <= width else s[:width] + "\n" + s[width:]
    return plain(s)


def _line(s: str, width: int = WRAP) -> str:
    """A token on one line of `width` characters ('…' when cut)."""
    s = repr(s)[1:-1]
    s = s if len(s) <= width else s[:width - 1] + "…"
    return plain(s)


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
