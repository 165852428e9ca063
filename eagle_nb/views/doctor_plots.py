"""Figures and tables of a `diagnosis.Diagnosis`: predicted τ per hypothesis against what the engine
reported, the per-position profiles of the best-fitting hypotheses, training beside serving,
where the acceptance goes from training to the engine (the waterfall), and the catalogue's serving
conditions beside the healthy pair.

Takes the Diagnosis (plain data) and returns a `matplotlib.figure.Figure` in the kit's one
convention (`views.palette`: healthy and each fault in their own colours, the rest neutral) or a
pandas DataFrame; draws nothing globally, reads no file, runs no model.
"""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from eagle_nb.doctor.ranking import P_FLOOR, TAU_FLOOR
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.io.train_logs import INDEPENDENT
from eagle_nb.views.palette import (
    finish_tau_figure,
    ACCEPT_COLOR,
    bar_style,
    line_style,
    ENGINE_COLOR,
    GUIDE_COLOR,
    FONT,
    NEUTRAL_COLOR,
    REJECT_COLOR,
    color,
    new_figure,
    plain,
    style_axes,
)


def static_text(h, checks) -> str:
    """What the static checks of the files say about one hypothesis, in words. A hypothesis's
    `static_evidence` lists only checks that warn or fail naming it, so on files that pass it is
    empty in every row; the pass itself is the information: it rules the fault out
    (`ruled_out_by`), or the fault's checks (its registry entry) pass without deciding, or no
    check of the files can see it."""
    if h.static_evidence:
        return "points at it: " + ", ".join(h.static_evidence)
    if h.ruled_out_by:
        return f"ruled out: {h.ruled_out_by} passes"
    if h.fault == HEALTHY:
        return "-"
    status = {c.id: c.status for c in checks}
    ran = [f"{cid} {status[cid]}" for cid in entry_checks(h.fault) if cid in status]
    return f"{', '.join(ran)} (does not decide)" if ran else "no check of the files sees it"


def entry_checks(fault: str) -> tuple[str, ...]:
    """The static checks that name `fault` in its registry entry (none for an unregistered name)."""
    return F.BY_NAME[fault].static.checks if fault in F.BY_NAME else ()


def hypotheses_table(d) -> pd.DataFrame:
    """One row per measured hypothesis: τ ± SE, per-position rates, distance and weight, and what
    the static checks of the files say about it (`static_text`)."""
    rows = []
    for h in d.hypotheses:
        p = h.predicted
        if p is None:
            continue
        rows.append({"hypothesis": h.fault, "tau": round(p["tau"], 3), "tau_se": round(p["tau_se"], 3),
                     "per_position": " / ".join(f"{x:.2f}" for x in p["per_position"]),
                     "z": None if h.distance is None else round(h.distance, 2),
                     "weight": None if h.weight is None else round(h.weight, 3),
                     "static checks of the files": static_text(h, d.checks)})
    return pd.DataFrame(rows)


def plot_diagnosis(d, top: int = 4) -> Figure:
    """Left: predicted τ of every hypothesis (±1 SE), the observation as a line with the ranking's
    τ tolerance. Right: per-position acceptance of the `top` best hypotheses and the observation."""
    hyps = [h for h in d.hypotheses if h.predicted is not None]
    fig = new_figure((11, 0.32 * max(len(hyps), 6) + 1.2))
    ax, ax2 = fig.subplots(1, 2, width_ratios=[1.2, 1])
    names = [h.fault for h in hyps][::-1]
    taus = [h.predicted["tau"] for h in hyps][::-1]
    ses = [h.predicted["tau_se"] for h in hyps][::-1]
    shown = {HEALTHY, d.verdict.cause}          # healthy and the verdict in their own colours
    ax.barh(names, taus, xerr=ses, color=[color(n) if n in shown else NEUTRAL_COLOR for n in names],
            capsize=2)
    obs = d.observation
    if obs and obs.get("tau") == obs.get("tau"):
        ax.axvline(obs["tau"], color="k", lw=1.5, label=f"observed τ {obs['tau']:.2f}")
        ax.axvspan(obs["tau"] - TAU_FLOOR, obs["tau"] + TAU_FLOOR, color="k", alpha=0.1)
        ax.legend(loc="lower right", fontsize=FONT)
    ax.set_xlabel(f"predicted τ at k = {d.inputs.get('depth')} (kit's loop, this pair)")
    ax.set_xlim(left=min(1.0, *taus) - 0.05)
    for h in hyps[:top]:
        per = h.predicted["per_position"]
        ax2.plot(range(1, len(per) + 1), per, marker="o", color=color(h.fault), label=plain(h.fault))
    if obs and obs.get("per_position"):
        per = obs["per_position"]
        ax2.errorbar(range(1, len(per) + 1), per, yerr=P_FLOOR, color="k", lw=2, marker="s",
                     label="observed")
    ax2.set_xlabel("draft position")
    ax2.set_ylabel("acceptance rate (vLLM per-position)")
    ax2.set_ylim(-0.02, 1.02)
    ax2.legend(fontsize=FONT)
    for each in (ax, ax2):
        style_axes(each)
    fig.suptitle(plain(f"doctor: {d.verdict.cause} ({d.verdict.confidence} confidence, "
                       f"{d.verdict.basis})"), fontsize=FONT + 1.5)
    return fig


def plot_training(diagnoses: dict) -> Figure:
    """Training accuracy beside serving acceptance, one panel per diagnosis ({title: Diagnosis}
    whose `train-accuracy` check ran): per draft step j, what training logged, what the files give
    teacher-forced (the same kind: acc_j or full_acc_j), the per-position acceptance the kit
    predicts for the files as written, and the engine's when the observation has it."""
    fig = new_figure((5.2 * len(diagnoses), 3.8))
    axes = fig.subplots(1, len(diagnoses), squeeze=False)[0]
    for ax, (title, d) in zip(axes, diagnoses.items()):
        c = next((c for c in d.checks if c.id == "train-accuracy"), None)
        if c is None or not c.data:
            raise ValueError(f"{title}: the diagnosis has no measured train-accuracy check "
                             "(pass train_log= or train_acc= to diagnose)")
        kind = "acc_j" if c.data["kind"] == INDEPENDENT else "full_acc_j"
        steps = range(1, len(c.data["trained"]) + 1)
        ax.plot(steps, c.data["trained"], "k--", marker="s", label=f"training log ({kind})")
        ax.plot(steps, c.data["files"], marker="o", color=color(HEALTHY),
                label=f"the files, teacher-forced ({kind})")
        healthy = next((h for h in d.hypotheses if h.fault == HEALTHY and h.predicted), None)
        if healthy is not None:
            per = healthy.predicted["per_position"]
            ax.plot(range(1, len(per) + 1), per, marker="^", color=NEUTRAL_COLOR,
                    label="the files served: acceptance per position")
        obs = d.observation or {}
        if obs.get("per_position"):
            per = obs["per_position"]
            ax.plot(range(1, len(per) + 1), per, marker="v", color=ENGINE_COLOR, lw=2,
                    label="the engine: acceptance per position")
        served = f"; engine τ {obs['tau']:.2f}" if obs.get("tau") == obs.get("tau") and "tau" in obs else ""
        ax.set_title(plain(f"{title}: training {'reproduced' if c.status == 'pass' else 'NOT reproduced'}"
                           f"{served}"), fontsize=FONT + 0.5)
        ax.set_xlabel("draft step j")
        ax.set_ylabel("accuracy / acceptance")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=FONT - 1, loc="upper right")
        style_axes(ax)
    return fig


def checks_table(d) -> pd.DataFrame:
    return pd.DataFrame([{"check": c.id, "status": c.status, "evidence": c.evidence,
                          "points at": ", ".join(c.faults)} for c in d.checks])


def plot_waterfall(d) -> Figure:
    """Where the acceptance goes (doctor/waterfall.py): one horizontal bar per measured step, top to
    bottom in order; the first from τ = 1 (nothing accepted) to its τ, each next from the step
    before's τ to its own, green where τ rises, red where it falls. `d`: a Diagnosis, or its
    `waterfall` dict."""
    w = d if isinstance(d, dict) else d.waterfall
    if not w or not w.get("steps"):
        raise ValueError("the diagnosis has no waterfall (no step was measured)")
    steps = w["steps"]
    fig = new_figure((9.0, 0.42 * len(steps) + 1.3))
    ax = fig.subplots()
    prev = 1.0
    for i, s in enumerate(steps):
        first = s["delta"] is None
        lo, hi = (1.0, s["tau"]) if first else sorted((prev, s["tau"]))
        c = NEUTRAL_COLOR if first else ACCEPT_COLOR if s["delta"] >= 0 else REJECT_COLOR
        ax.barh(i, max(hi - lo, 1e-3), left=lo, color=c, height=0.6)
        change = "" if first else f" ({s['delta']:+.2f})"
        ax.text(hi + 0.03, i, f"τ {s['tau']:.2f}{change}", va="center", fontsize=FONT)
        prev = s["tau"]
    ax.axvline(1.0, color=GUIDE_COLOR, lw=1)
    ax.set_yticks(range(len(steps)), [plain(s["name"]) for s in steps])
    ax.invert_yaxis()
    top = max(s["tau"] for s in steps)
    ax.set_xlim(0.9, top + 0.25 * (top - 0.9) + 0.3)
    ax.set_xlabel(f"τ at depth {w['depth']} (accepted tokens per verify step)")
    ax.set_title("where the acceptance goes: training to the engine, each step measured")
    style_axes(ax)
    return fig


def plot_condition_catalogue(frame: pd.DataFrame, title: str | None = None) -> Figure:
    """The serving conditions of a measured catalogue (`catalogue.conditions_frame`): τ per
    condition as bars with its 95% interval, the healthy pair's τ marked, a condition that does not
    apply to the pair labelled n/a; beside them each one's per-position acceptance."""
    names = list(frame.index)
    fig = new_figure((9.0, 0.3 * len(names) + 2.0))
    a, b = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.2, 1]})
    y = list(range(len(names)))[::-1]
    base = frame.loc[HEALTHY, "tau"] if HEALTHY in frame.index else None
    for yi, n in zip(y, names):
        row = frame.loc[n]
        if row["tau"] is None or row["tau"] != row["tau"]:
            a.text(1.02, yi, "n/a on this pair", va="center", fontsize=FONT, color=NEUTRAL_COLOR)
            continue
        err = None
        if row["95% interval"]:
            lo, hi = (float(x) for x in row["95% interval"].strip("[]").split(","))
            err = [[row["tau"] - lo], [hi - row["tau"]]]
        a.barh(yi, row["tau"], xerr=err, error_kw={"lw": 0.8, "capsize": 2}, **bar_style(n))
        a.text(row["tau"] + 0.03, yi + 0.3, f"{row['tau']:.2f}", va="center", fontsize=FONT)
        per = [float(x) for x in row["per-position"].split(" / ")]
        b.plot(range(1, len(per) + 1), per, label=n, **line_style(n))
    if base is not None:
        a.axvline(base, color=GUIDE_COLOR, ls="--", lw=0.8)
    a.axvline(1.0, color=GUIDE_COLOR, ls="-.", lw=0.8)
    top = max([t for t in frame["tau"] if t == t and t is not None] + [1.0])
    a.set_yticks(y, [plain(n) for n in names])
    a.set(xlabel="τ with 95% interval (dashed: healthy)", xlim=(0.9, top * 1.2), title="τ per condition")
    return finish_tau_figure(fig, a, b, title)
