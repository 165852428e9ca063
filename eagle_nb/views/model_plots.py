"""Figures and tables of what a model and a checkpoint look like: captured hidden states and their
layer ids (notebook 02), checkpoint configs, key names and the d2t vocabulary map (notebook 01).

Inputs are `CapturedStates`, `validate.Report`s from `checkpoints.inspect.inspect_checkpoint`
(which carry the ids as written and the original key names) and tensors; outputs are `Figure`s built without
pyplot, in the kit's one convention (`views.palette`), and DataFrames. Draws only: reads no file,
runs no model. Acceptance figures live in `views.acceptance`.
"""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from eagle_nb.model.capture import norm_profile
from eagle_nb.model.layers import CONVENTIONS, from_hf
from eagle_nb.views.palette import (
    ACCEPT_COLOR,
    DATA_COLOR,
    FONT,
    GUIDE_COLOR,
    HIGHLIGHT_COLOR,
    NEUTRAL_COLOR,
    REJECT_COLOR,
    new_axes,
    style_axes,
    token_text,
)


# -- hidden states (notebook 02) ------------------------------------------------------------------
def plot_layer_norms(states, highlight=(), ax=None) -> Figure:
    """Mean and max per-token L2 norm of each captured layer (HF ids), EAGLE-3 layers highlighted.
    `states`: CapturedStates. The norm grows through the residual stream; the captured low/mid/high
    layers sit at very different scales, which is why `fc` (not a plain sum) fuses them."""
    fig, (ax,) = new_axes(ax, size=(7.0, 3.8))
    prof = norm_profile(states)
    ids = [k for k, _, _ in prof]
    means = [v for _, v, _ in prof]
    maxes = [v for _, _, v in prof]
    colors = [HIGHLIGHT_COLOR if k in set(highlight) else NEUTRAL_COLOR for k in ids]
    ax.bar(ids, means, color=colors, label="mean per-token norm")
    ax.plot(ids, maxes, "k.", label="max per-token norm")
    log = bool(means and min(means) > 0 and max(maxes) / min(means) > 50)
    if log:
        ax.set_yscale("log")
    for k, v in zip(ids, maxes):   # above the max dot, never on it
        if k in set(highlight):
            ax.annotate(f"EAGLE-3\nid {k}", (k, v), xytext=(0, 6), textcoords="offset points",
                        ha="center", va="bottom", fontsize=FONT)
    if maxes:
        top = max(maxes)
        ax.set_ylim(top=top * (8 if log else 1.35))
    ax.set_xticks(ids)
    ax.set_xlabel(f"HF hidden_states id (k = input of layer k; {states.num_layers} = last layer "
                  f"output, pre-norm)")
    ax.set_ylabel("L2 norm")
    ax.set_title(f"Residual stream norm per layer: {states.model_class}")
    ax.legend(fontsize=FONT, loc="upper left")
    style_axes(ax)
    return fig


def layer_id_table(layer_ids, num_layers: int | None = None) -> pd.DataFrame:
    """The captured layers (HF ids) written in every id convention, one row per convention."""
    names = ["low", "mid", "high"] if len(layer_ids) == 3 else [f"aux{i}" for i in range(len(layer_ids))]
    meaning = {0: "input of decoder layer k (= HF hidden_states[k])", 1: "output of decoder layer k"}
    rows = []
    for conv, off in CONVENTIONS.items():
        row = {"convention": conv, **dict(zip(names, from_hf(layer_ids, conv))),
               "id k means": meaning[off]}
        rows.append(row)
    df = pd.DataFrame(rows).set_index("convention")
    if num_layers is not None:
        df.attrs["num_layers"] = num_layers
    return df


# -- checkpoints and vocabulary map (notebook 01) -------------------------------------------------
def config_table(reports: dict) -> pd.DataFrame:
    """Validation reports (`validate.Report`) side by side: one column per checkpoint."""
    cols = {}
    for name, rep in reports.items():
        d = rep.as_dict()
        w = rep.ids_as_written
        d["layer ids as written"] = (
            "not written (EAGLE default 2, L//2, L-3)" if w is None
            else f"eagle_config: {w['ids']} (output-of-layer)" if w["convention"] == "sglang-config"
            else f"top level: {w['ids']} (HF ids)")
        d["problems"] = "; ".join(d["problems"]) or "none"
        d["warnings"] = "; ".join(d["warnings"]) or "none"
        d["missing"], d["unexpected"] = len(d["missing"]), len(d["unexpected"])
        cols[name] = {k: (str(v) if isinstance(v, (list, dict, tuple)) else v) for k, v in d.items()}
    return pd.DataFrame(cols)


def key_names_table(reports: dict) -> pd.DataFrame:
    """Weight names per checkpoint format side by side, aligned on eagle_nb's own name.
    `reports`: {label: validate.Report} (their `key_names`). A dash marks a tensor the checkpoint
    does not hold."""
    table: dict[str, dict[str, str]] = {}
    shapes: dict[str, str] = {}
    for label, rep in reports.items():
        for key, (ours, shape) in rep.key_names.items():
            if ours is None:
                ours = f"(?) {key}" if key in rep.unexpected else f"(dropped) {key}"
            table.setdefault(ours, {})[f"{label} [{rep.format}]"] = key
            shapes.setdefault(ours, "×".join(map(str, shape)))
    df = pd.DataFrame.from_dict(table, orient="index").fillna("—")
    df.insert(0, "shape", pd.Series(shapes))
    df.index.name = "eagle_nb name"
    return df.sort_index()


def d2t_table(drafter, tokenizer=None, n: int = 8) -> pd.DataFrame:
    """A few draft ids spread over the draft vocabulary: offset, target id = draft id + offset,
    the token, and whether t2d marks that target id."""
    import torch
    d2t, t2d = drafter.d2t.cpu(), drafter.t2d.cpu()
    ids = torch.linspace(0, d2t.numel() - 1, n).round().long().unique()
    rows = []
    for i in ids.tolist():
        tid = i + int(d2t[i])
        rows.append({"draft id": i, "d2t[i] (offset)": int(d2t[i]), "target id = i + d2t[i]": tid,
                     "token": token_text(tokenizer, tid) if tokenizer is not None else "",
                     "t2d[target id]": bool(t2d[tid]) if 0 <= tid < t2d.numel() else "out of range",
                     "wrong reading d2t[i] as id": int(d2t[i])})
    return pd.DataFrame(rows)


def plot_d2t_offsets(d2t, vocab_size: int | None = None, verdict: str | None = None) -> Figure:
    """Left: the offsets d2t[i] against draft id i. Right: the target id each draft id maps to,
    i + d2t[i] (correct), against d2t[i] read as an absolute id (the fault) and the identity."""
    import torch
    d = torch.as_tensor(d2t).long().cpu()
    i = torch.arange(d.numel())
    fig, (a, b) = new_axes(None, ncols=2, size=(4.6, 3.6))
    a.plot(i, d, ".", ms=2, color=DATA_COLOR)
    a.set_xlabel("draft id i")
    a.set_ylabel("d2t[i]")
    a.set_title("d2t holds offsets" + (f"\nverdict: {verdict}" if verdict else ""))
    b.plot(i, i + d, ".", ms=2, color=ACCEPT_COLOR, label="target id = i + d2t[i] (correct)")
    b.plot(i, d, ".", ms=2, color=REJECT_COLOR, label="d2t[i] as absolute id (fault)")
    b.plot(i, i, "--", lw=1, color=GUIDE_COLOR, label="identity (d2t all zero)")
    if vocab_size:
        b.axhline(vocab_size, color="k", lw=0.8, ls=":", label=f"target vocab V={vocab_size}")
    b.set_xlabel("draft id i")
    b.set_ylabel("target id")
    b.set_title("where each draft id lands\nin the target vocabulary")
    b.legend(fontsize=FONT, markerscale=4)
    for ax in (a, b):
        style_axes(ax)
    return fig
