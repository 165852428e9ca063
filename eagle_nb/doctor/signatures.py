"""The doctor's third phase when the target cannot run here (and no recording stands in for it):
each hypothesis' prediction is the fault signature the catalogue measured
(data/fault_catalogue.json), and its distance to the observation is computed here; ranking,
hypotheses and the verdict are the same phases as for a measured pair (hypotheses.py, verdict.py).

A fault's signature is what it does to acceptance *relative to the healthy pair*, per depth k:

    share_f(k) = sum_{i<k} p_f,i / sum_{i<k} p_h,i        (its share of the healthy accepted drafts)

from the per-position rates p measured on the shipped pair at depth 4, greedy and T = 1 (the two
give a range [min, max]); past depth 4 the rates are extended geometrically with their last ratio.
The observation's share is (tau - 1) / (tau_h - 1), with the healthy tau of the user's pair replayed
from a recording when one is given (`--features`), else the band [1 + sum of the catalogue's healthy
T = 1 rates, 1 + sum of HEALTHY_ALPHA^(i+1)]. The distance of a fault is the gap between the two
ranges over SHARE_TOL (per position too when the engine reported per-position rates). A pair that
is not the shipped one moves a fault's share, so SHARE_TOL is wide and the confidence is never
'high' on this basis. The serving-path faults these files can have (the registry's `serving`
facts, for the files' `Facts`) are hypotheses too, each by the signature that stands in for it.
Knows catalogue rows and check results; runs a model only to replay a recording (`--features`).
"""
from __future__ import annotations

import math

from eagle_nb.experiment import faults as F
from eagle_nb.experiment.fault_entry import Facts
from eagle_nb.experiment.faults import HEALTHY

MEASURED_DEPTH = 4            # the catalogue's depth
HEALTHY_ALPHA = 0.85          # generous per-draft acceptance of a strong chain drafter (upper band)
SHARE_TOL = 0.15              # transfer tolerance of a share between pairs (the catalogue's own
                              # greedy vs T = 1 shares differ by up to ~0.2 for several faults)
CONSISTENT_Z = 2.0            # a hypothesis within this distance explains the observation


def _extend(p, k: int) -> list[float]:
    """Per-position rates to depth k: measured ones, then geometric with the last ratio (<= 1)."""
    p = list(p)[:k]
    while len(p) < k:
        ratio = min(1.0, p[-1] / p[-2]) if len(p) > 1 and p[-2] > 0 else 0.0
        p.append(p[-1] * ratio)
    return p


def _rates(row: dict, k: int) -> list[list[float]]:
    return [_extend(r["per_position"], k) for r in row["results"].values()]


def healthy_band(cat: dict, k: int) -> tuple[list[float], list[float]]:
    """(low, high) healthy per-position rates at depth k: the catalogue's lowest healthy rates,
    and HEALTHY_ALPHA^(i+1) (or the catalogue's, if higher)."""
    rows = _rates(next(r for r in cat["rows"] if r["fault"] == HEALTHY), k)
    lo = [min(col) for col in zip(*rows)]
    hi = [max(max(col), HEALTHY_ALPHA ** (i + 1)) for i, col in enumerate(zip(*rows))]
    return lo, hi


def fault_shares(cat: dict, k: int) -> dict[str, list[tuple[float, float]]]:
    """name -> [(low, high) share of the healthy pair] for tau, then per position, at depth k."""
    h = _rates(next(r for r in cat["rows"] if r["fault"] == HEALTHY), k)
    out = {}
    for row in cat["rows"]:
        if row["kind"] != "switch" or not row["results"]:
            continue
        f = _rates(row, k)
        tau = [sum(a) / max(sum(b), 1e-9) for a, b in zip(f, h)]
        pos = [[a / max(b, 1e-9) for a, b in zip(fa, hb)] for fa, hb in zip(f, h)]
        out[row["fault"]] = [(min(tau), max(tau))] + [(min(c), max(c)) for c in zip(*pos)]
    return out


def observed_shares(obs, k: int, band, healthy_tau: float | None) -> list[tuple[float, float]]:
    """The observation's share of a healthy pair for tau (and per position when reported)."""
    lo, hi = band
    if healthy_tau is not None and healthy_tau > 1:
        out = [((obs.tau - 1) / (healthy_tau - 1),) * 2]
    else:
        out = [((obs.tau - 1) / sum(hi), (obs.tau - 1) / max(sum(lo), 1e-9))]
    per = obs.per_position if obs.per_position and len(obs.per_position) == k else None
    out += [(p / h, p / max(lw, 1e-9)) for p, lw, h in zip(per or [], lo, hi)]
    return out


def distance(obs_sh, f_sh) -> float:
    """RMS over components of the gap between the observed and predicted share ranges / SHARE_TOL."""
    z = [max(0.0, f_lo - o_hi, o_lo - f_hi) / SHARE_TOL
         for (o_lo, o_hi), (f_lo, f_hi) in zip(obs_sh, f_sh)]
    return math.sqrt(sum(x * x for x in z) / len(z))


def predicted(sh, k, band, healthy_tau) -> dict:
    lo, hi = band
    t_lo = 1 + sh[0][0] * ((healthy_tau - 1) if healthy_tau else sum(lo))
    t_hi = 1 + sh[0][1] * ((healthy_tau - 1) if healthy_tau else sum(hi))
    return {"depth": k, "tau": (t_lo + t_hi) / 2, "tau_range": [t_lo, t_hi],
            "share_of_healthy": list(sh[0]), "basis": "catalogue signature (shipped pair, depth "
            f"{MEASURED_DEPTH}{'' if k <= MEASURED_DEPTH else ', extended'})"}


def signatures(st) -> None:
    """When nothing was measured, the files pass and an engine reported a tau: fill `profiles`
    (each hypothesis' predicted range), `distances`, `facts`, `serving`, `shares` and the basis."""
    obs = st.obs
    if st.profiles or not st.rankable or obs.crash_lines or st.rep is None or not st.rep.ok or st.failed:
        return
    st.facts, healthy_tau = facts_of(st), None
    if st.features is not None:
        healthy_tau, note = replayed_healthy_tau(st.drafter, st.target_path, st.features, st.k,
                                                 st.max_new_tokens)
        st.notes.append(note)
    if st.k > MEASURED_DEPTH:
        st.notes.append(f"the catalogue was measured at depth {MEASURED_DEPTH}; signatures at k = {st.k} "
                        "extend its per-position rates geometrically")
    from eagle_nb.doctor.catalogue import load
    cat = load()
    band, shares = healthy_band(cat, st.k), fault_shares(cat, st.k)
    st.shares = o = observed_shares(obs, st.k, band, healthy_tau)
    serve = {f.name: f for f in sorted((f for f in F.REGISTRY if f.serving), key=lambda f: f.serving.flow)
             if f.serving.applies(st.facts)}                   # in the engine's data-flow order
    st.serving = list(serve)
    for name in dict.fromkeys([HEALTHY, *serve, *shares]):
        src = (serve[name].serving.signature_of or name) if name in serve else name
        sh = [(1.0, 1.0)] * len(o) if name == HEALTHY else shares.get(src)
        if sh is not None:
            st.profiles[name] = predicted(sh, st.k, band, healthy_tau)
            st.distances[name] = distance(o, sh[:len(o)])
    st.basis = "recording" if st.features is not None else "signature"
    st.basis_note = ("the catalogue's fault signatures (measured on the shipped pair)" + (
        f", relative to the healthy tau {healthy_tau:.2f} replayed from {st.features}"
        if st.features is not None else f", relative to a healthy band at k = {st.k}") + "; your target was not run")


def facts_of(st) -> Facts:
    """What the files say that decides which serving-path faults can happen to them."""
    from eagle_nb.engines.registry import entry, target_needs
    cfg, pre = st.rep.config, st.pre
    names = (pre.config.get("architectures") if pre is not None else None) or [None]
    wrapper = any(c.id == "target-layout" and c.status == "warn" for c in st.checks)
    return Facts(pre.architecture if pre is not None else None, names[0], wrapper, cfg.hidden_size,
                 cfg.target_hidden_size, cfg.num_aux, cfg.vocab_size, cfg.draft_vocab_size,
                 "embed_tokens.weight" in st.state, entry(st.obs.engine).label if st.obs.engine else None,
                 tuple(target_needs()))


def replayed_healthy_tau(drafter, target, features, k: int, max_new_tokens: int) -> tuple[float, str]:
    """tau of the pair as written, computed from a recording (greedy, no target run) through the
    one door for recordings."""
    from eagle_nb.experiment.recorded_pair import RecordedPair
    from eagle_nb.experiment.setting import Setting
    pair = RecordedPair(features, drafter, target, check_greedy=False)
    res = pair.run(pair.prompts(), Setting(depth=k, max_new_tokens=max_new_tokens), progress=False)
    tau = res.metrics.accept_length
    label = "an estimate (teacher-forced features)" if res.estimate else "exact (recorded greedy output)"
    return tau, f"healthy tau {tau:.2f} at k = {k} replayed from {features}: {label}"
