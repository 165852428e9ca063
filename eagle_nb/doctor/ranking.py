"""Rank fault hypotheses by how well their predicted acceptance explains what the engine reported.

A `Profile` is τ and the vLLM per-position acceptance rates at depth k, with standard errors from a
bootstrap over prompts (`profile_from_stats`). The distance between a prediction h and an
observation o is an RMS z-score over the components both have:

    z_tau = (o.tau - h.tau) / s_tau,   s_tau = sqrt(h.tau_se^2 + o.tau_se^2 + TAU_FLOOR^2)
    z_i   = (o.p_i - h.p_i) / s_i,     s_i   = sqrt(h.p_se_i^2 + P_FLOOR^2)
    distance = sqrt(mean(z^2)),        weight ∝ exp(-sum(z^2) / 2)   (normalised over hypotheses)

The floors are the tolerance between the kit's reference loop and a real engine on the same pair
and prompts: vLLM 0.32 (CPU) against this loop, shipped pair, 16 prompts × 64 tokens, k = 4 gave
Δτ = 0.03 and per-position differences ≤ 0.008 (issue 13's measurement); the floors take about
twice that. Hypotheses within `TIE_Z` of the best are reported as also consistent.

Knows nothing about models or faults; profiles are data.
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass

TAU_FLOOR = 0.05
P_FLOOR = 0.02
TIE_Z = 1.0
BOOTSTRAP = 200


@dataclass(frozen=True)
class Profile:
    depth: int
    tau: float
    tau_se: float
    per_position: tuple[float, ...]
    per_position_se: tuple[float, ...]
    prompt_taus: tuple[float, ...] = ()     # tau of each prompt, for paired comparisons

    def as_dict(self) -> dict:
        d = asdict(self)
        for k in ("per_position", "per_position_se", "prompt_taus"):
            d[k] = list(d[k])
        return d


def _per_prompt_sums(counts: list[int], depth: int) -> tuple[int, int, list[int]]:
    """(verify steps, accepted drafts, steps accepting position i) of one prompt: integers, so a
    resample's totals are exact sums of these (the bootstrap never revisits the counts)."""
    return len(counts), sum(counts), [sum(a > i for a in counts) for i in range(depth)]


def _summarise(sums: list[tuple[int, int, list[int]]], depth: int) -> tuple[float, list[float]]:
    n = sum(x[0] for x in sums)
    return 1 + sum(x[1] for x in sums) / n, [sum(x[2][i] for x in sums) / n for i in range(depth)]


def profile_from_counts(per_prompt: list[list[int]], depth: int, seed: int = 0) -> Profile:
    """Profile of accepted counts per verify step, grouped by prompt (the unit we resample)."""
    per_prompt = [list(c) for c in per_prompt if c]
    if not per_prompt:
        raise ValueError("no verify steps: nothing to profile")
    sums = [_per_prompt_sums(c, depth) for c in per_prompt]
    tau, per = _summarise(sums, depth)
    rng = random.Random(seed)
    taus, pers = [], []
    for _ in range(BOOTSTRAP if len(per_prompt) > 1 else 0):
        sample = [sums[rng.randrange(len(sums))] for _ in sums]
        t, p = _summarise(sample, depth)
        taus.append(t)
        pers.append(p)

    def sd(xs):
        if len(xs) < 2:
            return 0.0
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return Profile(depth, tau, sd(taus), tuple(per),
                   tuple(sd([p[i] for p in pers]) for i in range(depth)),
                   tuple(1 + sum(c) / len(c) for c in per_prompt))


def paired_gain(a: Profile, b: Profile) -> tuple[float, float]:
    """(mean, standard error) of the per-prompt tau gain of `a` over `b` on the same prompts: far
    less noisy than comparing two pooled taus, since prompt difficulty cancels."""
    if len(a.prompt_taus) != len(b.prompt_taus) or not a.prompt_taus:
        raise ValueError("paired comparison needs per-prompt taus over the same prompts")
    d = [x - y for x, y in zip(a.prompt_taus, b.prompt_taus)]
    m = sum(d) / len(d)
    var = sum((x - m) ** 2 for x in d) / (len(d) - 1) if len(d) > 1 else 0.0
    return m, math.sqrt(var / len(d))


def profile_from_stats(stats_list) -> Profile:
    """From the SpecStats of one run (one per prompt)."""
    depths = {s.depth for s in stats_list}
    if len(depths) != 1:
        raise ValueError(f"cannot pool traces of different depths {sorted(depths)}")
    return profile_from_counts([s.accept_counts for s in stats_list], depths.pop())


def z_scores(pred: Profile, tau: float, per_position=None, tau_se: float = 0.0) -> list[float]:
    z = [(tau - pred.tau) / math.sqrt(pred.tau_se ** 2 + tau_se ** 2 + TAU_FLOOR ** 2)]
    if per_position is not None:
        if len(per_position) != pred.depth:
            raise ValueError(f"observed {len(per_position)} per-position rates, predicted depth "
                             f"{pred.depth}")
        z += [(o - p) / math.sqrt(se ** 2 + P_FLOOR ** 2)
              for o, p, se in zip(per_position, pred.per_position, pred.per_position_se)]
    return z


def rank(predictions: dict[str, Profile], tau: float, per_position=None,
         tau_se: float = 0.0) -> list[tuple[str, float, float]]:
    """[(name, distance, weight)] best first. Weights sum to 1 over the hypotheses given."""
    if not predictions:
        return []
    scored = []
    for name, pred in predictions.items():
        z = z_scores(pred, tau, per_position, tau_se)
        scored.append((name, math.sqrt(sum(x * x for x in z) / len(z)), sum(x * x for x in z)))
    best = min(s for _, _, s in scored)
    w = {n: math.exp(-(s - best) / 2) for n, _, s in scored}
    total = sum(w.values())
    out = [(n, d, w[n] / total) for n, d, _ in scored]
    return sorted(out, key=lambda r: (r[1], r[0]))


def ties(ranked: list[tuple[str, float, float]]) -> list[str]:
    """Names (after the best) whose distance is within TIE_Z of the best one."""
    if not ranked:
        return []
    d0 = ranked[0][1]
    return [n for n, d, _ in ranked[1:] if d - d0 <= TIE_Z]


def confidence(ranked, static_support: bool = False) -> str:
    """'high' when the best explains the observation (distance <= 2) and takes >= 80% of the weight
    or static evidence agrees; 'low' when nothing fits (best distance > 3); else 'medium'."""
    if not ranked:
        return "low"
    _, d, w = ranked[0]
    if d > 3:
        return "low"
    if d <= 2 and (w >= 0.8 or static_support):
        return "high"
    return "medium"
