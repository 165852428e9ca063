"""A speculation profile measured on a pair: `measure_profile(pair, prompts, depth=...)` runs
`pair.run` (greedy chains by the one pass, T > 0 by the live loop; a `RecordedPair` answers greedy
chains from its recording) and `profile_from_result` turns any chain `RunResult` into a
`SpeculationProfile` with the measurement conditions written beside the rates (pair, prompts and
their source, template, temperature, depth, steps).

The pooled histogram is the result's `accept_counts` (steps by accepted drafts, bonus excluded),
so the profile's mean acceptance length is the result's tau exactly; the per-request mean averages
each prompt's 1 + accepted / steps. Knows the pair's interface; nothing about plotting or engines.
"""
from __future__ import annotations

import contextlib
import time

from eagle_nb.experiment.results import RunResult
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.prompts import Chat
from eagle_nb.profiles.profile import ProfileError, SpeculationProfile


def prompt_template(prompts) -> str:
    """How the prompts reach the target: through its chat template, or as raw text."""
    chats = sum(isinstance(p, Chat) for p in prompts)
    if chats and chats != len(prompts):
        return "mixed (chat and raw)"
    return "target chat template (generation prompt added)" if chats else "none (raw completion text)"


def profile_from_result(res: RunResult, prompts_source: str | None = None,
                        seconds: float | None = None) -> SpeculationProfile:
    """The profile of one chain run (see the module docstring). Trees are refused: their accepted
    path depth is not a chain's per-position acceptance."""
    s = res.setting
    if s.is_tree:
        raise ProfileError(f"{s.label}: a tree (topk {s.topk}) has no chain profile; measure with "
                           "topk 1")
    per_request = [1 + sum(st.accept_counts) / len(st.accept_counts)
                   for st in res.stats if st.accept_counts]
    conditions = {
        "pair": {"target": res.wiring.get("target"), "drafter": res.wiring.get("drafter")},
        "prompts": {"count": len(res.prompts), "source": prompts_source or "given in Python",
                    "template": prompt_template(res.prompts)},
        "temperature": s.temperature, "depth": s.depth, "num_steps": res.metrics.verify_steps,
        "batch_size": 1,                      # the reference loop decodes one sequence at a time
        "max_new_tokens": s.max_new_tokens, "new_tokens": res.new_tokens, "seed": s.seed,
        "computed_by": res.computed_by, "faults": list(s.faults),
        "validation": "greedy: drafts checked against the target's argmax" if s.temperature == 0
        else "rejection sampling (Leviathan/Chen) at this temperature",
    }
    if seconds is not None:
        conditions["seconds"] = round(seconds, 3)
    return SpeculationProfile.from_histogram(
        res.metrics.accept_counts, s.depth, per_request=per_request, conditions=conditions,
        draft=res.wiring.get("drafter"), target=res.wiring.get("target"))


def measure_profile(pair, prompts, depth: int = 4, *, max_new_tokens: int = 128,
                    temperature: float = 0.0, seed: int = 0, faults=(),
                    prompts_source: str | None = None) -> SpeculationProfile:
    """Run the pair over `prompts` at this depth and temperature and return its profile."""
    s = Setting(faults=tuple(faults), depth=depth, temperature=temperature,
                max_new_tokens=max_new_tokens, seed=seed)
    t0 = time.perf_counter()
    one_pass = getattr(pair, "one_pass", None)
    with one_pass.depths_up_to(depth) if one_pass is not None else contextlib.nullcontext(), \
            _counted(pair):
        res = pair.run(prompts, s, progress=False)      # the one pass: only depths 1..depth
    return profile_from_result(res, prompts_source, time.perf_counter() - t0)


@contextlib.contextmanager
def _counted(pair):
    """A profile holds counted steps, as an engine reports them: chains at T > 0 run the live loop
    while it is measured, not the one pass's expected (fractional) counts."""
    sampled = getattr(pair, "sampled_one_pass", None)
    if sampled:
        pair.sampled_one_pass = False
    try:
        yield
    finally:
        if sampled:
            pair.sampled_one_pass = sampled
