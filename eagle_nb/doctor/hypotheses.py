"""The doctor's fourth phase, rank: every hypothesis (healthy, each fault measured or signed, each
fault a check or an engine error names), ordered, each saying why it is where it is (`ranked_by`).

One evidence map (which checks point at a fault), one `ruled_out` (the registry's `static`: a
passing deciding check, or files of a format the fault cannot happen to) and one hypothesis
builder serve both the measured path and the signature path; only the order differs:
  * measured (measure.py): by z-score to the observation (ranking.py); exact ties put healthy
    first, then faults a check points at;
  * signatures (signatures.py): the serving-path faults that fit (z <= CONSISTENT_Z) and are not
    ruled out lead, those a check of the files points at first, then in the engine's data flow;
    then the rest by (ruled out, not fitting, z).
Weights are exp(-z^2/2) shares. Faults named only by checks or engine errors follow, labelled
'crash-only' (a crash entry of the registry) or 'not measured'. Knows the registry and the
profiles; runs nothing. Serving conditions the doctor was asked to measure (conditions/registry.py)
are ranked like measured faults; no check of the files rules one out.
"""
from __future__ import annotations

import math

from eagle_nb.conditions import registry as C
from eagle_nb.doctor import ranking
from eagle_nb.doctor.diagnosis import Hypothesis
from eagle_nb.doctor.signatures import CONSISTENT_Z
from eagle_nb.engines.crashes import recognise
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.faults import HEALTHY

HEALTHY_STORY = "the pair as written, wired as the engines should wire it"


def evidence(checks) -> dict[str, list[str]]:
    """fault -> ids of the checks that point at it (a check names faults only when it does not pass)."""
    out: dict[str, list[str]] = {}
    for c in checks:
        for f in c.faults:
            out.setdefault(f, []).append(c.id)
    return out


def ruled_out(name: str, checks, fmt: str | None = None) -> str | None:
    """The passing check that shows files of format `fmt` cannot have fault `name`, or None."""
    if name == HEALTHY or name in C.BY_NAME:       # a serving condition leaves no trace in the files
        return None
    return F.entry(name).static.rules_out_files(checks, fmt)


def hypothesis(name: str, st, ev: dict, *, kind: str, predicted=None, distance=None, weight=None,
               ranked_by: str = "") -> Hypothesis:
    """The one builder: story, reference and fix from the registry (on the serving path, the
    entry's story and serving-side check for these files), evidence and what rules it out."""
    check = ""
    if name == HEALTHY:
        story, ref, fix = ("the pair as written" if st.distances else HEALTHY_STORY), "", ""
    elif name in C.BY_NAME:         # a serving condition: its signature and the user's check
        c = C.entry(name)
        story, ref, fix, check = f"{c.story} (signature: {c.signature})", c.reference, c.fix, c.check
        kind = f"serving condition ({kind})"
    else:
        f = F.entry(name)
        story, ref, fix = f.story, f.reference, f.fix
    if name in st.serving:
        f = F.entry(name)
        story, check = f.serving.story(st.facts), f.serving.check(st.facts)
        kind = f"serving path (signature of {f.serving.signature_of or name})"
    return Hypothesis(name, story, ref, fix, predicted, distance, weight, ev.get(name, []),
                      ruled_out(name, st.checks, st.fmt), kind, check, ranked_by)


def rank(st) -> None:
    """Fill `hypotheses`, best first."""
    ev = evidence(st.checks)
    obs = st.obs
    if obs is not None and obs.depth is not None and obs.depth != st.k:
        st.notes.append(f"observation depth {obs.depth} != --depth {st.k}: predictions use depth {st.k}")
    if st.distances:
        order, kind = by_signature(st, ev), "signature"
    elif st.profiles and st.rankable:
        order, kind = by_measurement(st, ev), "measured"
    else:
        order, kind = [(n, None, None, "") for n in st.profiles], "measured"
    st.hypotheses = [hypothesis(n, st, ev, kind=kind, predicted=_as_dict(st.profiles[n]), distance=d,
                                weight=w, ranked_by=why) for n, d, w, why in order]
    crash = [n for n, _ in recognise("\n".join(obs.crash_lines))] if obs is not None else []
    for name in dict.fromkeys(crash + [f for f in ev if f not in st.profiles]):
        only = F.entry(name).kind == F.CRASH
        st.hypotheses.append(hypothesis(
            name, st, ev, kind="crash-only" if only else "not measured",
            ranked_by="named by the engine's error" if name in crash else
            f"named by the {', '.join(ev[name])} check, not measured"))


def _as_dict(p):
    return p if isinstance(p, dict) else p.as_dict()


def by_measurement(st, ev) -> list[tuple]:
    """(name, z, weight, why) by z-score to the observation; exact ties (faults with no effect on
    this pair): healthy first, then faults a check points at, then the rest."""
    obs = st.obs
    per = obs.per_position if obs.per_position and len(obs.per_position) == st.k else None
    ranked = ranking.rank(st.profiles, obs.tau, per, obs.tau_se)
    ranked.sort(key=lambda r: (round(r[1], 9), r[0] != HEALTHY, r[0] not in ev))
    what = "tau and per-position" if per else "tau"
    return [(n, d, w, _out(n, st) or f"z {d:.2f}: {what} measured on this pair against the observation")
            for n, d, w in ranked]


def _out(name: str, st) -> str:
    cid = ruled_out(name, st.checks, st.fmt)
    return f"ruled out: the '{cid}' check passes" if cid else ""


def by_signature(st, ev) -> list[tuple]:
    """(name, z, weight, why): serving-path faults that fit lead (a check's evidence first, then
    the engine's data flow), then the rest by (ruled out, not fitting, z)."""
    d = st.distances
    ok = {n for n in d if d[n] <= CONSISTENT_Z and not ruled_out(n, st.checks, st.fmt)}
    lead = sorted((n for n in d if n in ok and n in st.serving),
                  key=lambda n: (not ev.get(n), st.serving.index(n)))
    rest = sorted((n for n in d if n not in lead),
                  key=lambda n: (bool(ruled_out(n, st.checks, st.fmt)), n not in ok, d[n]))
    w = [math.exp(-d[n] ** 2 / 2) for n in lead + rest]
    out = []
    for n, wi in zip(lead + rest, w):
        if n in lead:
            why = (f"serving path, the {', '.join(ev[n])} check points at it (z {d[n]:.2f})" if ev.get(n)
                   else f"serving path, in the order data flows through the engine (z {d[n]:.2f})")
        else:
            why = _out(n, st) or f"z {d[n]:.2f} against the signature" + ("" if n in ok else ", does not fit")
        out.append((n, d[n], wi / sum(w), why))
    return out
