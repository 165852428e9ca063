"""When the target cannot run here: rank an observation against the fault signatures the catalogue
measured (data/fault_catalogue.json), and say which basis the verdict used and how sure it is.

A fault's signature is what it does to acceptance *relative to the healthy pair*, per depth k:

    share_f(k) = sum_{i<k} p_f,i / sum_{i<k} p_h,i        (its share of the healthy accepted drafts)

from the per-position rates p measured on the shipped pair at depth 4, greedy and T = 1 (the two
give a range [min, max]); past depth 4 the rates are extended geometrically with their last ratio.
The observation's share is (tau - 1) / (tau_h - 1), with the healthy tau of the user's pair replayed
from a recording when one is given (`--features`), else the band [1 + sum of the catalogue's healthy
T = 1 rates, 1 + sum of HEALTHY_ALPHA^(i+1)]. The distance of a fault is the gap between the two
ranges over SHARE_TOL (per position too when the engine reported per-position rates). A pair that
is not the shipped one moves a fault's share, so SHARE_TOL is wide and the confidence is never
'high' on this basis. Knows catalogue rows and check results; never runs a model.
"""
from __future__ import annotations

import math

from eagle_nb.doctor import serving
from eagle_nb.doctor.diagnosis import Hypothesis, Verdict

HEALTHY = "healthy"
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


def _predicted(sh, k, band, healthy_tau) -> dict:
    lo, hi = band
    t_lo = 1 + sh[0][0] * ((healthy_tau - 1) if healthy_tau else sum(lo))
    t_hi = 1 + sh[0][1] * ((healthy_tau - 1) if healthy_tau else sum(hi))
    return {"depth": k, "tau": (t_lo + t_hi) / 2, "tau_range": [t_lo, t_hi],
            "share_of_healthy": list(sh[0]), "basis": "catalogue signature (shipped pair, depth "
            f"{MEASURED_DEPTH}{'' if k <= MEASURED_DEPTH else ', extended'})"}


def _ruled_out(name: str, checks, rep, ruled_by_pass: dict) -> str | None:
    passed = {c.id for c in checks if c.status == "pass"}
    cid = ruled_by_pass.get(name)
    if cid in passed:
        return cid
    # a `midlayer.*` checkpoint cannot lose `layers.0.*` keys to a `midlayer.*` loader
    if name == "layers0-keys-dropped" and rep.format != "speculators" and "keys" in passed:
        return "keys"
    return None


def judge(checks, rep, obs, k: int, cat_info: dict, facts: serving.Facts, ruled_by_pass: dict,
          healthy_tau: float | None = None, recording: str | None = None, catalogue=None):
    """(Verdict, hypotheses) for files that pass, from the catalogue's signatures."""
    from eagle_nb.doctor.catalogue import load
    cat = catalogue or load()
    band = healthy_band(cat, k)
    shares = fault_shares(cat, k)
    o = observed_shares(obs, k, band, healthy_tau)
    evidence: dict[str, list[str]] = {}
    for c in checks:
        for f in c.faults:
            evidence.setdefault(f, []).append(c.id)
    serve = {s.name: s for s in serving.applicable(facts)}
    hyps = {}
    for name in dict.fromkeys([HEALTHY, *serve, *shares]):
        s, info = serve.get(name), cat_info.get(name)
        src = s.signature_of if s else name
        sh = [(1.0, 1.0)] * len(o) if name == HEALTHY else shares.get(src)
        if sh is None:
            continue
        if s is not None:
            story, ref, kind, check = s.story(facts), s.reference, f"serving path (signature of {src})", s.check(facts)
        else:
            story = "the pair as written" if name == HEALTHY else getattr(info, "story", "")
            ref, kind, check = getattr(info, "reference", ""), "signature", ""
        hyps[name] = Hypothesis(name, story, ref, getattr(info, "fix", ""), _predicted(sh, k, band, healthy_tau),
                                distance(o, sh[:len(o)]), None, evidence.get(name, []),
                                _ruled_out(name, checks, rep, ruled_by_pass), kind, check)
    ok = {n: h for n, h in hyps.items() if h.distance <= CONSISTENT_Z and not h.ruled_out_by}
    lead_serving = sorted((h for n, h in ok.items() if n in serve),
                          key=lambda h: (not h.static_evidence, list(serve).index(h.fault)))
    rest = sorted((h for h in hyps.values() if h not in lead_serving),
                  key=lambda h: (bool(h.ruled_out_by), h.fault not in ok, h.distance))
    ordered = lead_serving + rest
    w = [math.exp(-h.distance ** 2 / 2) for h in ordered]
    for h, wi in zip(ordered, w):
        h.weight = wi / sum(w)
    for name in [f for f in evidence if f not in hyps]:          # crash-only or not measured
        info = cat_info.get(name)
        story, ref, fix = (getattr(info, a, "") for a in ("story", "reference", "fix"))
        kind = "crash-only" if getattr(info, "pattern", None) else "not measured"
        ordered.append(Hypothesis(name, story, ref, fix, None, None, None, evidence[name], None, kind))
    warns = [c.id for c in checks if c.status == "warn"]
    return _verdict(ordered, ok, lead_serving, obs, k, o, healthy_tau, recording, warns), ordered


def _verdict(ordered, ok, lead_serving, obs, k, o, healthy_tau, recording, warns=()) -> Verdict:
    basis = "recording" if recording else "signature"
    how = ("the catalogue's fault signatures (measured on the shipped pair)" + (
        f", relative to the healthy tau {healthy_tau:.2f} replayed from {recording}" if recording else
        f", relative to a healthy band at k = {k}") + "; your target was not run")
    pct = f"{100 * o[0][0]:.0f}-{100 * o[0][1]:.0f}%" if o[0][0] != o[0][1] else f"{100 * o[0][0]:.0f}%"
    warned = f" (warnings: {', '.join(warns)})" if warns else ""
    top = ordered[0]
    also = [h.fault for h in ordered[1:] if h.fault in ok]
    # never 'high' on signatures of another pair; 'medium' when a check of these files points at it
    sure = "medium" if top.static_evidence and top.fault in ok else "low"
    if top.fault == HEALTHY:
        return Verdict(HEALTHY, f"consistent with a healthy pair: observed tau {obs.tau:.2f} at "
                       f"k = {k} is {pct} of a healthy pair's accepted drafts (basis: {how})", "",
                       "low", basis, also)
    ruled = [h.fault for h in ordered if h.ruled_out_by and h.distance is not None
             and h.distance <= CONSISTENT_Z]
    if lead_serving:
        steps = "; ".join(f"({i}) {h.fault}: {serving.BY_NAME[h.fault].short}" + (
            f" (the {', '.join(h.static_evidence)} check points at it)" if h.static_evidence else "")
            for i, h in enumerate(lead_serving, 1))
        s = (f"no check of the files fails{warned}, and tau {obs.tau:.2f} at k = {k} is {pct} of a "
             f"healthy pair's accepted drafts: the fault is on the serving path. In order: {steps}")
        s += f". Ruled out by your files: {', '.join(ruled)}" if ruled else ""
        return Verdict(top.fault, f"{s}. Basis: {how}", top.serving_check, sure, basis,
                       [f for f in also if f != top.fault])
    return Verdict(top.fault, f"observed tau {obs.tau:.2f} at k = {k} ({pct} of a healthy pair's "
                   f"accepted drafts) fits the signature of '{top.fault}': {top.story} (basis: {how})",
                   top.fix, sure if top.fault in ok else "low", basis, also)


def replayed_healthy_tau(drafter, target, features, k: int, max_new_tokens: int) -> tuple[float, str]:
    """tau of the pair as written, replayed from a recording (greedy, no target run)."""
    from eagle_nb.checkpoints.load import load_drafter
    from eagle_nb.loop.replay import replay
    res = replay(load_drafter(drafter, target=target), features, depth=k,
                 max_new_tokens=max_new_tokens, progress=False)
    label = ("an estimate (teacher-forced features)" if res.estimate
             else "exact (recorded greedy output)")
    return res.metrics.accept_length, (f"healthy tau {res.metrics.accept_length:.2f} at k = {k} "
                                       f"replayed from {features}: {label}")


def offline(drafter, target, checks, rep, state, obs, k: int, cat_info: dict, pre, features=None,
            max_new_tokens: int = 32):
    """(Verdict, hypotheses, notes) for an observation when no measured profile exists: the files
    passed, and the target was not (or could not be) run."""
    from eagle_nb.experiment import faults as F
    ruled_by_pass = {f.name: f.static.check for f in F.REGISTRY if f.static.rules_out}
    cfg = rep.config
    arch = pre.architecture if pre is not None else None
    names = (pre.config.get("architectures") if pre is not None else None) or [None]
    wrapper = any(c.id == "target-layout" and c.status == "warn" for c in checks)
    facts = serving.Facts(arch, names[0], wrapper, cfg.hidden_size, cfg.target_hidden_size, cfg.num_aux, cfg.vocab_size,
                          cfg.draft_vocab_size, "embed_tokens.weight" in state, obs.engine)
    notes, healthy_tau = [], None
    if features is not None:
        healthy_tau, note = replayed_healthy_tau(drafter, target, features, k, max_new_tokens)
        notes.append(note)
    if k > MEASURED_DEPTH:
        notes.append(f"the catalogue was measured at depth {MEASURED_DEPTH}; signatures at k = {k} "
                     "extend its per-position rates geometrically")
    verdict, hyps = judge(checks, rep, obs, k, cat_info, facts, ruled_by_pass, healthy_tau,
                          str(features) if features is not None else None)
    return verdict, hyps, notes
