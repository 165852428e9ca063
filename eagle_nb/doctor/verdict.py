"""The doctor's last phase: the verdict, and the `Diagnosis` that carries it with everything found.

The rules, in order: an unreadable drafter; a recognised engine crash; a failing check (its most
severe fault, by the registry's `severity`); greedy observations of one pair that disagree (the
engine: observations.py); a probe that clearly raises tau; no observation to
rank (a healthy verdict, or the warnings); then the top hypothesis of the ranking (hypotheses.py),
measured on this pair (basis 'observation') or by the catalogue's signatures (basis 'signature' or
'recording'), saying why it is first when that is not simply the nearest prediction. Knows the
state's fields and the registry's words; computes nothing.
"""
from __future__ import annotations

from eagle_nb.conditions import registry as C
from eagle_nb.doctor import ranking, waterfall
from eagle_nb.doctor.diagnosis import Diagnosis, Verdict
from eagle_nb.doctor.observations import CHECK_ID as OBS_CHECK
from eagle_nb.doctor.signatures import CONSISTENT_Z
from eagle_nb.doctor.training import CHECK_ID as TRAIN_CHECK
from eagle_nb.engines.crashes import recognise
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.faults import HEALTHY


def verdict(st) -> Diagnosis:
    """The diagnosis: the verdict first, then every check, hypothesis and probe, as data."""
    obs, w = st.obs, waterfall.from_state(st)
    return Diagnosis(decide(st), st.checks, st.hypotheses, st.probes, obs.as_dict() if obs else None,
                     st.inputs, st.notes, st.workload.as_dict() if st.workload is not None else None,
                     w.as_dict() if w is not None else None)


def decide(st) -> Verdict:
    """The first rule that applies (module docstring)."""
    if st.unreadable is not None:
        return Verdict("undetermined", f"the drafter cannot be read: {st.unreadable}",
                       st.checks[0].fix, "high", "static")
    obs, fails = st.obs, st.failed
    if obs is not None and obs.crash_lines:
        name = recognise("\n".join(obs.crash_lines))[0][0]
        f = F.entry(name)
        return Verdict(name, f"the engine log shows a known crash: {f.story}", f.fix, "high", "log")
    if fails:
        return static_verdict(st, fails)
    apart = next((c for c in st.checks if c.id == OBS_CHECK and c.status == "warn"), None)
    if apart is not None and st.temperature == 0:
        return Verdict("engine", "greedy acceptance moves between the observations of one pair, which "
                       f"no drafter fault can do: {apart.evidence}", apart.fix, "high", "observations")
    better = [p for p in st.probes if p.better]
    if better:
        best = max(better, key=lambda p: p.tau)
        cause = F.entry(F.entry(best.name).probe.reveals)
        return Verdict(cause.name, f"{best.message}: {cause.story}", cause.fix, "medium", "probe")
    ranked = [h for h in st.hypotheses if h.distance is not None]
    if not st.rankable or not ranked:
        base = st.profiles.get(HEALTHY) if not st.distances else None
        warns = [c.id for c in st.checks if c.status == "warn"]
        s = "no fault found: static checks pass" + (f" (warnings: {', '.join(warns)})" if warns else "")
        if base is not None:
            s += f"; the reference loop predicts tau {base.tau:.2f} at depth {base.depth}"
        s += "; give what your engine reported (--observed-tau / --observed FILE) to rank faults"
        return Verdict(HEALTHY, s, "", "medium" if warns else "high", "none")
    return signature_verdict(st, ranked) if st.distances else measured_verdict(st, ranked)


def static_verdict(st, fails) -> Verdict:
    """The checkpoint itself is broken: the most severe fault a failing check names."""
    faults = sorted((f for c in fails for f in c.faults), key=F.severity_key)
    # the training-accuracy check alone cannot tell broken files from narrow training data
    sure = any(c.id != TRAIN_CHECK for c in fails)
    c = next((c for c in fails if faults and faults[0] in c.faults), fails[0])
    name = faults[0] if faults else "undetermined"
    summary = (f"the checkpoint itself is broken ({c.id}): {c.evidence}" if sure else
               f"training accuracy is not reproduced on these prompts ({c.id}): {c.evidence}")
    if st.obs is not None and name in st.profiles and not st.distances:
        summary += f"; this fault predicts tau {st.profiles[name].tau:.2f}, observed {st.obs.tau:.2f}"
    return Verdict(name, summary, c.fix, "high" if sure else "medium", "static",
                   [f for f in faults[1:] if f != name])


def measured_verdict(st, ranked) -> Verdict:
    """The nearest measured profile that no passing check rules out, its ties, and the files' hint."""
    obs, profiles = st.obs, st.profiles
    rows = [(h.fault, h.distance, h.weight) for h in ranked if not h.ruled_out_by]
    out = [h.fault for h in ranked if h.ruled_out_by]
    name, dist, _ = rows[0]
    also = ranking.ties(rows)
    warned = {f for c in st.checks if c.status == "warn" for f in c.faults}
    conf = ranking.confidence(rows, static_support=name in warned)
    if name != HEALTHY and name not in C.BY_NAME and HEALTHY in also and name not in warned:
        # a tie with the pair as written: no fault is named on numbers alone that do not set it
        # apart from healthy, unless a check of the files points at it (a serving condition the
        # user asked about is ranked as measured)
        dist = next(d for n, d, _ in rows if n == HEALTHY)
        also = [n for n, _, _ in rows if n in also + [name] and n != HEALTHY]
        name, conf = HEALTHY, "medium"
    pred = profiles[name]
    if name == HEALTHY:
        tail = (f"; the numbers alone do not tell it from: {', '.join(also)} (within z {ranking.TIE_Z:g} "
                f"of the best fit)") if also else ""
        return Verdict(HEALTHY, f"consistent with a healthy pair: observed tau {obs.tau:.2f}, the "
                       f"reference loop predicts {pred.tau:.2f} (z {dist:.1f}){tail}", "", conf,
                       "observation", also)
    if name in C.BY_NAME:
        return condition_verdict(st, name, dist, also, conf)
    f = F.entry(name)
    fix = f.fix
    tail = f"; equally consistent: {', '.join(also)}" if also else ""
    near = [n for n in out if n in profiles and abs(profiles[n].tau - obs.tau) < abs(pred.tau - obs.tau) + 0.1]
    tail += f" (ruled out by passing checks: {', '.join(near)})" if near else ""
    if HEALTHY in profiles:
        tail += f"; wired correctly this pair reaches tau {profiles[HEALTHY].tau:.2f}"
    seer = f.static.check
    if seer and any(c.id == seer and c.status == "pass" for c in st.checks):
        fix = (f"{fix} -- your files pass the '{seer}' check, so look at the converter or engine "
               f"that reads them").lstrip(" -")
    return Verdict(name, f"observed tau {obs.tau:.2f} fits '{name}' (predicted {pred.tau:.2f}, "
                   f"z {dist:.1f}): {f.story}{tail}", fix, conf, "observation", also)


def condition_verdict(st, name, dist, also, conf) -> Verdict:
    """A serving condition fits best: the files may be right, the serving is not."""
    c, obs, pred = C.entry(name), st.obs, st.profiles[name]
    tail = f"; equally consistent: {', '.join(also)}" if also else ""
    if HEALTHY in st.profiles:
        tail += f"; served as in training this pair reaches tau {st.profiles[HEALTHY].tau:.2f}"
    return Verdict(name, f"observed tau {obs.tau:.2f} fits the serving condition '{name}' (predicted "
                   f"{pred.tau:.2f}, z {dist:.1f}): {c.story}{tail}", f"{c.fix} (check: {c.check})",
                   conf, "observation", also)


def signature_verdict(st, ranked) -> Verdict:
    """By the catalogue's signatures: the serving path when a serving-path fault fits, in the order
    hypotheses.py gives them (and why), else the signature that fits."""
    obs, k, o = st.obs, st.k, st.shares
    pct = f"{100 * o[0][0]:.0f}-{100 * o[0][1]:.0f}%" if o[0][0] != o[0][1] else f"{100 * o[0][0]:.0f}%"
    warns = [c.id for c in st.checks if c.status == "warn"]
    ok = [h for h in ranked if h.distance <= CONSISTENT_Z and not h.ruled_out_by]
    top = ranked[0]
    also = [h.fault for h in ranked[1:] if h in ok]
    # never 'high' on signatures of another pair; 'medium' when a check of these files points at it
    sure = "medium" if top.static_evidence and top in ok else "low"
    if top.fault == HEALTHY:
        return Verdict(HEALTHY, f"consistent with a healthy pair: observed tau {obs.tau:.2f} at k = {k} "
                       f"is {pct} of a healthy pair's accepted drafts (basis: {st.basis_note})", "",
                       "low", st.basis, also)
    lead = [h for h in ranked if h.fault in st.serving and h in ok]       # hypotheses.py puts them first
    if not lead:
        return Verdict(top.fault, f"observed tau {obs.tau:.2f} at k = {k} ({pct} of a healthy pair's "
                       f"accepted drafts) fits the signature of '{top.fault}': {top.story} (basis: "
                       f"{st.basis_note})", top.fix, sure if top in ok else "low", st.basis, also)
    steps = "; ".join(f"({i}) {h.fault}: {F.entry(h.fault).serving.short}" + (
        f" (the {', '.join(h.static_evidence)} check points at it)" if h.static_evidence else "")
        for i, h in enumerate(lead, 1))
    warned = f" (warnings: {', '.join(warns)})" if warns else ""
    s = (f"no check of the files fails{warned}, and tau {obs.tau:.2f} at k = {k} is {pct} of a healthy "
         f"pair's accepted drafts: the fault is on the serving path. In order: {steps}")
    s += why_first(top, ok)
    ruled = [h.fault for h in ranked if h.ruled_out_by and h.distance <= CONSISTENT_Z]
    s += f". Ruled out by your files: {', '.join(ruled)}" if ruled else ""
    return Verdict(top.fault, f"{s}. Basis: {st.basis_note}", top.serving_check, sure, st.basis,
                   [f for f in also if f != top.fault])


def why_first(top, ok) -> str:
    """Why `top` leads when another fitting hypothesis is nearer the signature (empty otherwise)."""
    nearest = min(ok, key=lambda h: h.distance)
    if nearest is top or nearest.distance >= top.distance:
        return ""
    reason = ("a check of your files points at it" if top.static_evidence
              else "it comes first in the engine's data flow")
    return (f". {top.fault} is first because {reason}; by signature alone {nearest.fault} fits "
            f"closer (z {nearest.distance:.2f} vs {top.distance:.2f})")
