"""`eagle-nb doctor`: which known EAGLE-3 fault explains what the serving engine reported?

Four phases, each adding to one `diagnosis.Diagnosis`:
  1. static checks (static_checks.py): the checkpoint and the target's config, no generation;
  2. dynamic: the kit's reference loop measures τ and per-position acceptance of the pair as
     written and under every catalogue fault that applies (faults registry), on the user's prompts;
     plus the fc activation range in half precision;
  3. probes: the registry's faults that carry a `probe` are tried the other way round (neighbouring
     layer-id conventions, the target's embedding); one that clearly *raises* τ is a finding;
  4. the observation (observed.py; crash texts via crashes.py) ranked against the predictions
     (ranking.py), and a verdict: static evidence first, then a recognised engine error, then a
     probe, then the ranking.

Never executes checkpoint code (safetensors / weights_only loads only) and needs no GPU. Knows
nothing about how the numbers are drawn or rendered.
"""
from __future__ import annotations

import sys
from pathlib import Path

from eagle_nb.doctor import crashes, ranking, training
from eagle_nb.doctor.diagnosis import Check, Diagnosis, Hypothesis, Probe, Verdict
from eagle_nb.doctor.measure import first_line, measure_profiles
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.faults import HEALTHY


def _info(name: str) -> tuple[str, str, str]:
    """(story, reference, fix) of a registry entry; every name the doctor uses is one."""
    f = F.entry(name)
    return f.story, f.reference, f.fix


# -- phase 2: measure ------------------------------------------------------------------------------
def measure(pair, prompts, depth: int = 4, max_new_tokens: int = 32, temperature: float = 0.0,
            faults=None, progress: bool = True) -> tuple[dict, dict]:
    """({name: Profile} for 'healthy' and every fault that applies, {name: why it was skipped})."""
    names = [f.name for f in F.FAULTS] if faults is None else list(faults)
    with pair.one_pass.depths_up_to(depth):      # one depth: no deeper drafter steps
        by_t, errors = measure_profiles(pair, prompts, names, depth=depth, temperatures=(temperature,),
                                        max_new_tokens=max_new_tokens, progress=progress,
                                        desc=f"doctor: measuring faults (k={depth}, T={temperature})")
    profiles = {n: p[temperature] for n, p in by_t.items() if n not in errors}
    return profiles, {n: f"{type(e).__name__}: {first_line(e, 200)}" for n, e in errors.items()}


def fc_range_check(pair, prompts) -> Check:
    """Max |activation| entering and leaving fc on the prompts, against the fp16 range."""
    import torch

    from eagle_nb.doctor.checks_drafter import FP16_MAX
    d = pair.drafter
    xin = xout = 0.0
    with torch.no_grad():
        for x in pair.aux_features(prompts):        # the target's, or a recording's
            x = x.float().to(d.fc.weight.device)
            xin = max(xin, float(x.abs().max()))
            xout = max(xout, float(torch.nn.functional.linear(x, d.fc.weight.float()).abs().max()))
    ev = (f"max |fc input| {xin:.3g}, max |fc output| {xout:.3g} over {len(prompts)} prompts; fp16 "
          f"max {FP16_MAX:.0f} (headroom x{FP16_MAX / max(xin, xout, 1e-9):.0f})")
    if max(xin, xout) > FP16_MAX:
        return Check("dtype-range", "fail", "half-precision range in fc", ev, ["fp16-fc-overflow"],
                     "serve the drafter in bf16 or fp32")
    if max(xin, xout) > FP16_MAX / 8:
        return Check("dtype-range", "warn", "half-precision range in fc", ev + ": under 8x headroom",
                     ["fp16-fc-overflow"], "serve the drafter in bf16 or fp32")
    return Check("dtype-range", "pass", "half-precision range in fc", ev)


def is_greedy_recording(features) -> bool:
    """A recording of the target's greedy continuations (ours or an engine's), which the one pass
    answers exactly; trainers' teacher-forced files only give the replayed healthy tau."""
    from eagle_nb.loop.recording import Recording
    return not Recording(features).teacher_forced


# -- phase 3: probes -------------------------------------------------------------------------------
PROBE_Z, PROBE_MIN_GAIN = 3.0, 0.1     # "clearly higher": paired gain > 3 SE and > 0.1


def probes(profiles: dict, pair) -> list[Probe]:
    """Each switch whose entry has a `probe`, measured: does switching it on clearly raise tau?"""
    base = profiles.get(HEALTHY)
    out = []
    for f in F.FAULTS:
        p = profiles.get(f.name)
        if f.probe is None or base is None or p is None:
            continue
        gain, se = ranking.paired_gain(p, base)
        better = gain > max(PROBE_Z * se, PROBE_MIN_GAIN)
        ids = ""
        if "layer_ids" in f.changes:
            from eagle_nb.experiment.setting import Setting
            w = pair.wiring(Setting(faults=(f.name,)))
            ids = f" {list(w.layer_ids)} vs written {list(pair.layer_ids)}:"
        msg = (f"{f.probe.finding}:{ids} accepts tau {p.tau:.2f} vs {base.tau:.2f} (gain {gain:+.2f} ± "
               f"{se:.2f} per prompt)" if better else
               f"{f.name}:{ids} tau {p.tau:.2f} vs {base.tau:.2f} as written (gain {gain:+.2f} ± "
               f"{se:.2f}: not clearly better)")
        out.append(Probe(f.name, p.tau, base.tau, better, msg))
    return out


# -- phase 4: verdict ------------------------------------------------------------------------------
def ruled_out(name: str, checks) -> str | None:
    """The passing check that shows the files cannot have fault `name` (its entry's
    `static.rules_out`), or None."""
    if name == HEALTHY or not F.entry(name).static.rules_out:
        return None
    cid = F.entry(name).static.check
    return cid if any(c.id == cid and c.status == "pass" for c in checks) else None


def _hypotheses(profiles, ranked, checks, crash_names) -> list[Hypothesis]:
    evidence: dict[str, list[str]] = {}
    for c in checks:
        for f in c.faults:
            evidence.setdefault(f, []).append(c.id)
    order = [n for n, _, _ in ranked] or list(profiles)
    score = {n: (d, w) for n, d, w in ranked}
    out = []
    for name in order:
        story, ref, fix = _info(name) if name != HEALTHY else (
            "the pair as written, wired as the engines should wire it", "", "")
        d, w = score.get(name, (None, None))
        out.append(Hypothesis(name, story, ref, fix, profiles[name].as_dict(), d, w,
                              evidence.get(name, []), ruled_out(name, checks), "measured"))
    for name in list(crash_names) + [f for f in evidence if f not in profiles and f not in crash_names]:
        story, ref, fix = _info(name)
        kind = "crash-only" if name in F.BY_NAME and F.BY_NAME[name].kind == "crash" else "not measured"
        out.append(Hypothesis(name, story, ref, fix, None, None, None, evidence.get(name, []), kind=kind))
    return out


def verdict(checks, obs, ranked, probe_list, profiles) -> Verdict:
    """A recognised engine crash first; then a failing check (its most severe fault, by the
    registry's `severity`); then a probe that clearly raises tau; then the ranking."""
    fails = [c for c in checks if c.status == "fail"]
    if obs is not None and obs.crash_lines:
        name = crashes.recognise("\n".join(obs.crash_lines))[0][0]
        story, _, fix = _info(name)
        return Verdict(name, f"the engine log shows a known crash: {story}", fix, "high", "log")
    if fails:
        faults = [f for c in fails for f in c.faults]
        faults.sort(key=F.severity_key)
        c = next((c for c in fails if faults and faults[0] in c.faults), fails[0])
        name = faults[0] if faults else "undetermined"
        summary = f"the checkpoint itself is broken ({c.id}): {c.evidence}"
        if obs is not None and name in profiles:
            p = profiles[name]
            summary += f"; this fault predicts tau {p.tau:.2f}, observed {obs.tau:.2f}"
        return Verdict(name, summary, c.fix, "high", "static", [f for f in faults[1:] if f != name])
    better = [p for p in probe_list if p.better]
    if better:
        best = max(better, key=lambda p: p.tau)
        cause = F.entry(best.name).probe.reveals
        story, _, fix = _info(cause)
        return Verdict(cause, f"{best.message}: {story}", fix, "medium", "probe")
    if obs is None or not ranked:
        base = profiles.get(HEALTHY)
        warns = [c.id for c in checks if c.status == "warn"]
        s = "no fault found: static checks pass" + (f" (warnings: {', '.join(warns)})" if warns else "")
        if base is not None:
            s += f"; the reference loop predicts tau {base.tau:.2f} at depth {base.depth}"
        s += "; give what your engine reported (--observed-tau / --observed LOGFILE) to rank faults"
        return Verdict(HEALTHY, s, "", "medium" if warns else "high", "none")
    out = [r[0] for r in ranked if ruled_out(r[0], checks)]
    ranked = [r for r in ranked if r[0] not in out]
    name, dist, _ = ranked[0]
    also = ranking.ties(ranked)
    warned = {f for c in checks if c.status == "warn" for f in c.faults}
    conf = ranking.confidence(ranked, static_support=name in warned)
    pred = profiles[name]
    if name == HEALTHY:
        return Verdict(HEALTHY, f"consistent with a healthy pair: observed tau {obs.tau:.2f}, the "
                       f"reference loop predicts {pred.tau:.2f} (z {dist:.1f})", "", conf,
                       "observation", also)
    story, _, fix = _info(name)
    tail = f"; equally consistent: {', '.join(also)}" if also else ""
    near = [n for n in out if n in profiles and abs(profiles[n].tau - obs.tau) < abs(pred.tau - obs.tau) + 0.1]
    tail += f" (ruled out by passing checks: {', '.join(near)})" if near else ""
    if HEALTHY in profiles:
        tail += f"; wired correctly this pair reaches tau {profiles[HEALTHY].tau:.2f}"
    seer = F.entry(name).static.check
    if seer and any(c.id == seer and c.status == "pass" for c in checks):
        fix = (f"{fix} -- your files pass the '{seer}' check, so look at the converter or engine "
               f"that reads them").lstrip(" -")
    return Verdict(name, f"observed tau {obs.tau:.2f} fits '{name}' (predicted {pred.tau:.2f}, "
                   f"z {dist:.1f}): {story}{tail}", fix, conf, "observation", also)


# What the doctor measures on. Greedy chains come from the one pass (onepass_runs.py), cheap enough
# for every shipped prompt x 64 tokens, where a drafter with layer ids shifted by one is named by the
# probe (+0.16 +- 0.04 on the shipped pair; 8 x 32 gave +0.10 +- 0.08). T > 0: live loop, 8 x 32.
WORKLOAD = {"one-pass": (None, 64), "live loop": (8, 32)}     # (prompts, new tokens); None: all


def workload(temperature: float, n_prompts: int | None, max_new_tokens: int | None) -> tuple:
    n, new = WORKLOAD["one-pass" if temperature == 0 else "live loop"]
    return (n if n_prompts is None else n_prompts), (new if max_new_tokens is None else max_new_tokens)


def doctor(drafter, target=None, *, depth: int | None = None, prompts=None, n_prompts: int | None = None,
           max_new_tokens: int | None = None, temperature: float = 0.0, observed_log=None,
           observed_url=None, observed_tau=None, observed_per_position=None, dynamic: bool = True,
           faults=None, pair=None, progress: bool = True, features=None,
           trust_remote_code: bool = False, train_log=None, train_acc=None) -> Diagnosis:
    """Diagnose a drafter (checkpoint directory) against a target (directory; default: the shipped
    target) and, optionally, what the engine reported. `prompts` is a list of strings or a JSON-lines
    file; `dynamic=False` runs the static part only; `faults` limits the measured faults (default:
    the whole registry); `pair` reuses an already loaded `session.Pair` (and its run cache). A target
    that cannot run here (preflight.py) is never loaded: an observation is then ranked against the
    catalogue's fault signatures, relative to a healthy tau replayed from `features` if given.
    `n_prompts` / `max_new_tokens` default to `WORKLOAD` (all shipped prompts x 64 at T = 0).
    `train_log` (a SpecForge / SafeAILab EAGLE / speculators log) or `train_acc` (per-step
    accuracies, e.g. "0.8,0.6") adds the check that the files reproduce training's accuracy."""
    from eagle_nb.doctor.observed import read_observation
    from eagle_nb.doctor.preflight import plan, preflight
    from eagle_nb.doctor.static_checks import run_static
    from eagle_nb.io.paths import SHIPPED_TARGET
    from eagle_nb.io.weight_files import CheckpointError
    target_path = target if target is not None else SHIPPED_TARGET
    obs = read_observation(log=observed_log, url=observed_url, tau=observed_tau,
                           per_position=observed_per_position, depth=depth)
    k = depth or (obs.depth if obs is not None and obs.depth else 4)
    train = training.read_training(train_log, train_acc)
    n_prompts, max_new_tokens = workload(temperature, n_prompts, max_new_tokens)
    inputs = {"target": str(target_path), "drafter": str(drafter), "depth": k,
              "prompts": None, "max_new_tokens": max_new_tokens, "temperature": temperature}
    pre = None if pair is not None else preflight(target_path, trust_remote_code=trust_remote_code)
    recorded = pair is None and features is not None and is_greedy_recording(features)
    notes = plan(pre, dynamic=dynamic, features=features, depth=k, recorded=recorded,
                 observed=obs and f"{obs.source}: tau {obs.tau:.2f} at k = {k}")
    if progress:
        print("\n".join(notes), file=sys.stderr, flush=True)
    cat = F.BY_NAME                  # every fault the doctor can name: story, reference, fix
    # 1. static (a GGUF drafter: static only; the reference loop runs HF checkpoints)
    from eagle_nb.checkpoints.gguf_read import is_gguf
    if is_gguf(drafter):
        from eagle_nb.doctor.gguf_checks import gguf_checks
        from eagle_nb.doctor.target_meta import target_meta
        tm = target_meta(target_path)
        checks, _ = gguf_checks(drafter, tm.config if tm else None)
        return Diagnosis(verdict(checks, obs, [], [], {}), checks, _hypotheses({}, [], checks, {}),
                         [], obs and obs.as_dict(), inputs, notes + ["GGUF drafter: static checks "
                                                                     "only; pass the HF drafter for the measured part"])
    try:
        checks, rep, state, _ = run_static(drafter, target_path)
    except CheckpointError as e:
        c = Check("checkpoint", "fail", "checkpoint readable", str(e), [], "fix the file named above")
        return Diagnosis(Verdict("undetermined", f"the drafter cannot be read: {e}", c.fix, "high",
                                 "static"), [c], observation=obs and obs.as_dict(), inputs=inputs)
    # 2. dynamic
    profiles, ranked, probe_list = {}, [], []
    if dynamic and not rep.ok:
        notes.append("dynamic part skipped: the checkpoint does not load strictly (see failed checks)")
    elif dynamic and (pre is None or pre.can_run or recorded):
        from eagle_nb.experiment.pair import Pair
        from eagle_nb.experiment.recorded_pair import RecordedPair
        spec = str(drafter) if rep.format == "speculators" else None
        if pair is None and recorded:     # the target's recording answers greedy chains exactly
            pair = RecordedPair(features, drafter, target_path, speculators_path=spec)
        pair = pair or Pair(target, drafter, speculators_path=spec, trust_remote_code=trust_remote_code)
        if prompts is None or isinstance(prompts, (str, Path)):
            plist = pair.prompts(n_prompts, prompts)
        else:
            plist = list(prompts)[:n_prompts]
        inputs["prompts"] = len(plist)
        checks.append(fc_range_check(pair, plist))
        profiles, skipped = measure(pair, plist, k, max_new_tokens, temperature, faults, progress)
        how = "one pass (exact greedy chain acceptance)" if temperature == 0 else "the live loop"
        how += f" on the recording {features}" if recorded else ""
        notes.append(f"faults measured by {how} on {len(plist)} prompts x {max_new_tokens} tokens")
        notes += [f"fault {n} not measured: {why}" for n, why in skipped.items()]
        probe_list = probes(profiles, pair)
        if train is not None:
            checks.append(training.train_accuracy(pair, plist, train, k, max_new_tokens, checks))
    if not profiles and obs is not None and obs.tau == obs.tau and not obs.crash_lines and rep.ok \
            and not any(c.status == "fail" for c in checks):      # 2'. the catalogue's signatures
        from eagle_nb.doctor.signatures import offline
        v, hyps, more = offline(drafter, target_path, checks, rep, state, obs, k, cat, pre,
                                features, max_new_tokens)
        return Diagnosis(v, checks, hyps, [], obs.as_dict(), inputs, notes + more)
    # 4. rank
    if obs is not None and obs.depth is not None and obs.depth != k:
        notes.append(f"observation depth {obs.depth} != --depth {k}: predictions use depth {k}")
    if obs is not None and profiles and obs.tau == obs.tau:       # not NaN (crash-only log)
        per = obs.per_position if obs.per_position and len(obs.per_position) == k else None
        ranked = ranking.rank(profiles, obs.tau, per, obs.tau_se)
        # exact ties (faults with no effect on this pair): healthy first, then faults a check
        # points at, then the rest
        seen = {f for c in checks if c.status != "pass" for f in c.faults}
        ranked.sort(key=lambda r: (round(r[1], 9), r[0] != HEALTHY, r[0] not in seen))
    v = verdict(checks, obs, ranked, probe_list, profiles)
    crash_names = [n for n, _ in crashes.recognise("\n".join(obs.crash_lines))] if obs else []
    hyps = _hypotheses(profiles, ranked, checks, dict.fromkeys(crash_names))
    return Diagnosis(v, checks, hyps, probe_list, obs.as_dict() if obs else None, inputs, notes)
