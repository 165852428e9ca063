"""Greedy chain speculation replayed step by step against a recording: the slow reference that
the one door for recordings, `experiment.recorded_pair.RecordedPair` (one drafter pass over every
position, loop/onepass.py), is tested against (tests/experiment/test_recorded_pair.py). Compute
from a recording through `RecordedPair`; this module is the reference only.

Why this is exact: with greedy verification the committed tokens are always the target's greedy
tokens, so every cycle's verified positions, target tokens and step-0 drafter inputs (the target's
aux states at committed positions) are determined by one greedy continuation and its aux states,
whatever the drafter proposes. Replaying `chain.generate`'s drafter calls against a recording
therefore reproduces its accept counts; the only difference is floating-point: the live loop
computes committed states in chunks of k+1 tokens, the recording one token at a time (equal up to
~1e-6; a tie in the drafter's argmax could flip, the tests on the shipped pair check it does not).
Knows nothing about targets or checkpoint files; greedy only.
"""
from __future__ import annotations

import time

import torch

from eagle_nb.loop.chain import SpecStats, VerifyStep, accept_greedy
from eagle_nb.recordings.records import Record, RecordingError


def check_record(rec: Record, depth: int, max_new_tokens: int) -> int:
    """Tokens a depth-`depth` replay of `max_new_tokens` reads from `rec` (prompt included)."""
    S, T0, F = rec.input_ids, rec.prompt_len, rec.aux
    need = T0 + max_new_tokens + depth
    if S.numel() < need or F.shape[0] < T0 + max_new_tokens - 1:
        raise RecordingError(f"record {rec.name}: {S.numel() - T0} recorded tokens after the prompt; "
                             f"max_new_tokens={max_new_tokens} at depth {depth} needs "
                             f"{max_new_tokens + depth}")
    return need


@torch.no_grad()
def replay_record(drafter, rec: Record, depth: int, max_new_tokens: int, eos_token_id=None) -> SpecStats:
    """One prompt's greedy speculation at `depth`, target tokens and features from `rec`: the live
    loop's drafter calls step by step."""
    S, T0, F = rec.input_ids, rec.prompt_len, rec.aux
    check_record(rec, depth, max_new_tokens)
    t_start = time.perf_counter()
    dev, fdtype = drafter.fc.weight.device, drafter.fc.weight.dtype
    stats = SpecStats(depth, 0.0, T0)
    dcache = drafter.new_cache(1, T0 + max_new_tokens + 2 * depth + 2)
    tokens = [int(S[T0])]                                    # the prefill's token, not speculative
    pend_ids, pend_feats, dstart = S[1:T0 + 1], F[:T0], 0
    while len(tokens) < max_new_tokens and tokens[-1] != eos_token_id:
        n = T0 + len(tokens) - 1                             # committed target positions
        t0 = time.perf_counter()
        # the drafter calls of speculate.generate, greedy: extend with target features, k-1 own steps
        dcache.rollback(dstart)
        lg, h = drafter.step(pend_ids[None].to(dev), drafter.fuse(pend_feats[None].to(dev, fdtype)),
                             dcache, dstart)
        dcache.advance(dstart + pend_ids.numel())
        drafts = []
        for i in range(depth):
            tid = drafter.draft_to_target(lg[:, -1].argmax(-1))
            drafts.append(tid)
            if i < depth - 1:
                pos = dcache.pos
                lg, h = drafter.step(tid[:, None], h[:, -1:], dcache, pos)
                dcache.advance(pos + 1)
        draft_ids = torch.stack(drafts, 1)[0].cpu()            # (k,)
        # NOTE: entries after the first rejection are the greedy continuation, not what the target
        # would predict after a rejected draft (unknowable offline); accept counts never use them.
        target_tokens = S[n + 1:n + depth + 2]                 # the target's greedy tokens there
        a = accept_greedy(draft_ids, target_tokens)
        accepted = draft_ids[:a].tolist()
        tokens.extend(accepted + [int(target_tokens[a])])
        stats.steps.append(VerifyStep(a, draft_ids.tolist(), target_tokens.tolist(),
                                      time.perf_counter() - t0, 0.0))
        pend_ids, pend_feats, dstart = S[n + 1:n + a + 2], F[n:n + a + 1], n
        if eos_token_id is not None and eos_token_id in accepted:
            break
    if eos_token_id is not None and eos_token_id in tokens:
        tokens = tokens[:tokens.index(eos_token_id) + 1]
    stats.tokens = tokens[:max_new_tokens]
    stats.total_s = time.perf_counter() - t_start
    return stats


def replay_reference(drafter, recording, depth: int, max_new_tokens: int) -> list[SpecStats]:
    """Every record of `recording` (the kit's format) replayed step by step: the slow reference
    the one pass (`experiment.recorded_pair.RecordedPair`) is tested against."""
    eos = recording.meta.get("eos_token_id")
    return [replay_record(drafter, r, depth, max_new_tokens, eos) for r in recording]
