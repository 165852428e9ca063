"""The doctor's third phase when the target (or a greedy recording of it) can run: the kit's
reference loop measures τ and per-position acceptance of the pair as written and under every
catalogue fault that applies (the fault registry), on the user's prompts; the fc activation range
in half precision; the registry's probes (a fault switched on the other way round: neighbouring
layer-id conventions, the target's embedding; one that clearly *raises* τ is a finding); and, when
training's accuracy was given, whether the files reproduce it (training.py). With a workload
(workload.py), the pair runs on its requests' healthy forms and under the conditions it chose, and
the healthy run gives the workload's coverage and loop share.

`measure_profiles` is the one loop behind these predictions and the catalogue's table
(catalogue.py): for 'healthy' and every name, at each temperature, `Pair.run` (cached per
`Setting`) gives the statistics and `ranking.profile_from_stats` the profile. A fault that raises
one of `catch` is recorded with its exception; one broken fault never stops the others. A recording
is computed from through its one door, `experiment.recorded_pair.RecordedPair`. Knows nothing about
ranking or rendering.
"""
from __future__ import annotations

from pathlib import Path

from eagle_nb.conditions import registry as C
from eagle_nb.doctor import ranking, training
from eagle_nb.doctor.checks_drafter import FP16_MAX
from eagle_nb.doctor.diagnosis import Check, Probe
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.model.fault_names import FP16_FC_OVERFLOW

PROBE_Z, PROBE_MIN_GAIN = 3.0, 0.1     # "clearly higher": paired gain > 3 SE and > 0.1


def measure(st) -> None:
    """Fill `profiles`, `probes` and the measured checks when the target or a recording can run."""
    runs = st.pre is None or st.pre.can_run or st.recorded
    if not (st.dynamic and st.measurable and runs):
        if st.conditions:
            st.notes.append(f"serving conditions {', '.join(st.conditions)} not measured: they need "
                            "the target to run here (the catalogue holds no signature of theirs)")
        return
    pair = st.pair or open_pair(st)
    if st.prompts is None or isinstance(st.prompts, (str, Path)):
        plist = pair.prompts(st.n_prompts, st.prompts)
    else:
        plist = list(st.prompts)[:st.n_prompts]
    st.inputs["prompts"] = len(plist)
    st.checks.append(fc_range_check(pair, plist))
    # each condition is measured in a setting of its own, so any mix may be asked (two templates too)
    conditions = sorted((C.entry(n).name for n in dict.fromkeys(st.conditions)), key=C.ORDER.__getitem__)
    st.profiles, skipped = measure_faults(pair, plist, st.k, st.max_new_tokens, st.temperature,
                                          st.faults, st.progress, conditions)
    how = "one pass (exact greedy chain acceptance)" if st.temperature == 0 else "the live loop"
    how += f" on the recording {st.features}" if st.recorded else ""
    st.notes.append(f"faults measured by {how} on {len(plist)} prompts x {st.max_new_tokens} tokens")
    st.notes += [f"{'condition' if n in C.BY_NAME else 'fault'} {n} not measured: {why}"
                 for n, why in skipped.items()]
    st.probes = probes(st.profiles, pair)
    if st.workload is not None and HEALTHY in st.profiles and not st.recorded:
        workload_run(st, pair, plist)
        served_runs(st, pair, plist)
    if st.train is not None:
        st.checks.append(training.train_accuracy(pair, plist, st.train, st.k, st.max_new_tokens, st.checks))


def workload_run(st, pair, plist) -> None:
    """The workload's coverage and loop share, from the healthy run just measured (the pair's run
    cache returns it)."""
    from eagle_nb.conditions.workload import drafter_mask
    from eagle_nb.experiment.setting import Setting
    res = pair.run(plist, Setting(depth=st.k, temperature=st.temperature, max_new_tokens=st.max_new_tokens),
                   progress=False)
    st.workload.add_run(res.stats, drafter_mask(pair.drafter), st.workload_keep, pair.decode)


def served_runs(st, pair, plist) -> None:
    """tau as the workload is served, cumulatively: its first served condition alone (measured
    above), then each next one added to those before it, run together (the waterfall's steps,
    waterfall.py). A combination that cannot run is recorded with why, and the chain stops there."""
    from eagle_nb.experiment.setting import Setting
    names = [n for n in st.workload.served() if n in st.profiles]
    for i in range(len(names)):
        with_ = tuple(names[:i + 1])
        if i == 0:
            st.served.append((with_, st.profiles[names[0]].tau, ""))
            continue
        try:
            with pair.one_pass.depths_up_to(st.k):
                res = pair.run(plist, Setting(conditions=with_, depth=st.k, temperature=st.temperature,
                                              max_new_tokens=st.max_new_tokens), progress=False)
        except (ValueError, RuntimeError) as e:     # a ConditionError is a ValueError
            st.served.append((with_, None, f"{type(e).__name__}: {first_line(e, 200)}"))
            return
        st.served.append((with_, ranking.profile_from_stats(res.stats).tau, ""))


def open_pair(st):
    """The pair the doctor measures: a greedy recording of the target through the one door
    (`RecordedPair`), else the loaded target."""
    from eagle_nb.experiment.pair import Pair
    from eagle_nb.experiment.recorded_pair import RecordedPair
    spec = str(st.drafter) if st.rep.format == "speculators" else None
    if st.recorded:                        # the target's recording answers greedy chains exactly
        return RecordedPair(st.features, st.drafter, st.target_path, speculators_path=spec)
    pair = Pair(st.target, st.drafter, speculators_path=spec, trust_remote_code=st.trust_remote_code)
    pair.sampled_one_pass = False          # the doctor counts steps at T > 0, as an engine does
    return pair


def measure_faults(pair, prompts, depth: int = 4, max_new_tokens: int = 32, temperature: float = 0.0,
                   faults=None, progress: bool = True, conditions=()) -> tuple[dict, dict]:
    """({name: Profile} for 'healthy', every fault that applies and every condition asked for,
    {name: why it was skipped})."""
    names = ([f.name for f in F.FAULTS] if faults is None else list(faults)) + list(conditions)
    with pair.one_pass.depths_up_to(depth):      # one depth: no deeper drafter steps
        by_t, errors = measure_profiles(pair, prompts, names, depth=depth, temperatures=(temperature,),
                                        max_new_tokens=max_new_tokens, progress=progress,
                                        desc=f"doctor: measuring faults (k={depth}, T={temperature})")
    profiles = {n: p[temperature] for n, p in by_t.items() if n not in errors}
    return profiles, {n: f"{type(e).__name__}: {first_line(e, 200)}" for n, e in errors.items()}


def measure_profiles(pair, prompts, names, *, depth: int, temperatures, max_new_tokens: int,
                     catch=Exception, raise_for=(HEALTHY,), desc: str = "measuring faults",
                     leave: bool = False, progress: bool = True) -> tuple[dict, dict]:
    """({name: {temperature: Profile}}, {name: exception}) for 'healthy' then each of `names` (a
    fault's, or a serving condition's). An error of a name in `raise_for` propagates."""
    from tqdm.auto import tqdm

    from eagle_nb.experiment.setting import Setting
    profiles, errors = {}, {}
    for name in tqdm([HEALTHY, *names], desc=desc, disable=not progress, leave=leave):
        cond = name in C.BY_NAME                    # a serving condition, else a fault
        faults = () if name == HEALTHY or cond else (name,)
        profiles[name] = {}
        for T in temperatures:
            try:
                res = pair.run(prompts, Setting(faults=faults, conditions=(name,) if cond else (),
                                                depth=depth, temperature=T,
                                                max_new_tokens=max_new_tokens), progress=False)
            except catch as e:      # noqa: BLE001 - one broken fault must not stop the others
                if name in raise_for:
                    raise
                errors[name] = e
                break
            profiles[name][T] = ranking.profile_from_stats(res.stats)
    return profiles, errors


def first_line(e: BaseException, limit: int | None = None) -> str:
    """The first line of an exception's message (cut to `limit` characters)."""
    return str(e).splitlines()[0][:limit] if str(e) else ""


def fc_range_check(pair, prompts) -> Check:
    """Max |activation| entering and leaving fc on the prompts, against the fp16 range."""
    import torch
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
        return Check("dtype-range", "fail", "half-precision range in fc", ev, [FP16_FC_OVERFLOW],
                     "serve the drafter in bf16 or fp32")
    if max(xin, xout) > FP16_MAX / 8:
        return Check("dtype-range", "warn", "half-precision range in fc", ev + ": under 8x headroom",
                     [FP16_FC_OVERFLOW], "serve the drafter in bf16 or fp32")
    return Check("dtype-range", "pass", "half-precision range in fc", ev)


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
