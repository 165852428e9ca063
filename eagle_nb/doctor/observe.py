"""The doctor's first phase: what the engine and the trainer reported, and what can run here.

Reads the observation (`engines.observation.observe`: numbers, any registered engine's log or a
file of its responses, or a `/metrics` page), what training reported (training.py), the depth
every prediction is made at (`--depth`, else the observation's, else 4), whether the target can
run here (preflight.py, from files only) or a greedy recording stands in for it, and writes the
plan in words before any measurement starts. Knows files and the observation; runs no model.
"""
from __future__ import annotations

import sys
from pathlib import Path

from eagle_nb.doctor import preflight, training
from eagle_nb.engines.observation import observe as read_observation
from eagle_nb.io.paths import SHIPPED_TARGET, pair_for, shipped
from eagle_nb.recordings.recording import Recording


def observe(st) -> None:
    """Fill `obs` (and `observations`, when several were given), `k`, `train`, `target_path`, `pre`,
    `recorded`, `inputs` and the plan in `notes`."""
    if st.target is None:       # a shipped drafter's own target, else the default pair's
        files = pair_for(drafter=st.drafter) if isinstance(st.drafter, (str, Path)) else None
        st.target_path = shipped(files.target if files else SHIPPED_TARGET, "the shipped target")
    else:
        st.target_path = st.target
    logs = st.observed_log if isinstance(st.observed_log, (list, tuple)) else [st.observed_log]
    st.observations = [read_observation(log=p, depth=st.depth) for p in logs[1:]]
    st.obs = read_observation(log=logs[0], url=st.observed_url, tau=st.observed_tau,
                              per_position=st.observed_per_position, depth=st.depth)
    if st.observations:        # several logs or response files: the first is ranked, all compared
        st.observations.insert(0, st.obs)
    st.k = st.depth or (st.obs.depth if st.obs is not None and st.obs.depth else 4)
    st.train = training.read_training(st.train_log, st.train_acc)
    st.inputs = {"target": str(st.target_path), "drafter": str(st.drafter), "depth": st.k,
                 "prompts": None, "max_new_tokens": st.max_new_tokens, "temperature": st.temperature}
    st.pre = None if st.pair is not None else preflight.preflight(st.target_path,
                                                                  trust_remote_code=st.trust_remote_code)
    # a recording of the target's greedy continuations (ours or an engine's) is measured exactly by
    # the one pass; trainers' teacher-forced files only give the healthy tau (an estimate)
    st.recorded = st.pair is None and st.features is not None and not Recording(st.features).teacher_forced
    obs = st.obs
    st.notes = preflight.plan(st.pre, dynamic=st.dynamic, features=st.features, depth=st.k,
                              recorded=st.recorded, conditions=tuple(st.conditions or ()),
                              observed=obs and f"{obs.source}: tau {obs.tau:.2f} at k = {st.k}")
    if st.progress:
        print("\n".join(st.notes), file=sys.stderr, flush=True)
