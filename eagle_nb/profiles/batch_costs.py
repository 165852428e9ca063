"""The step costs `eagle-nb tune` needs, measured on the local pair at several batch sizes, as
`bench.step_costs` measures them at batch 1: a plain cached target forward over one token per
sequence (t_verify at k = 0, the target-only decode step, no hooks), the forward over k + 1
tokens per sequence with the aux capture the loop uses (t_verify at k), and one cached drafter
step over the batch (t_draft). Medians of repetitions (the verify and drafter steps interleaved).

These are this machine's costs for the local pair (a CPU, a tiny model): what `tune` predicts
from them holds here; for a served GPU give its own costs (io/step_costs.py).
Knows the pair's attributes (target, drafter, layer_ids, device); nothing about printing.
"""
from __future__ import annotations

import statistics
import time

import torch

from eagle_nb.io.step_costs import StepCosts
from eagle_nb.loop.chain import FEATURES_NONE, TargetRunner


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _timed(fn, device) -> float:
    _sync(device)
    t0 = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - t0


@torch.no_grad()
def measure_step_costs(pair, prompt_ids: torch.Tensor, batch_sizes=(1,), ks=(1, 2, 3, 4),
                       reps: int = 10) -> list[StepCosts]:
    """StepCosts per batch size for `prompt_ids` (1, T) repeated over the batch (see the module
    docstring); t_verify at k = 0 and at every k of `ks`."""
    out = []
    for b in batch_sizes:
        ids = prompt_ids.reshape(1, -1).repeat(int(b), 1).to(pair.device)
        times = {"t_draft": [], **{k: [] for k in (0, *ks)}}
        _one_batch(pair, ids, ks, reps, times)
        out.append(StepCosts(int(b), statistics.median(times["t_draft"]),
                             {k: statistics.median(times[k]) for k in (0, *ks)},
                             source=f"measured here ({pair.device}, prompt of {ids.shape[1]} tokens, "
                                    f"median of {reps})"))
    return out


def _one_batch(pair, ids: torch.Tensor, ks, reps: int, times: dict) -> None:
    target, drafter, dev = pair.target, pair.drafter, pair.device
    B, T = ids.shape
    tok = ids[:, -1:]
    # NOTE: the plain runner times a step without hooks; the aux runner's capture hooks are on the
    # same model while it is open, so the two are never open together.
    with TargetRunner(target, None, feature_mode=FEATURES_NONE) as plain:
        plain.forward(ids, keep=1)
        n0 = plain.length
        for _ in range(reps):
            times[0].append(_timed(lambda: plain.forward(tok), dev))
            plain.rollback(n0)
    with TargetRunner(target, pair.layer_ids) as runner:
        runner.forward(ids, keep=1)
        n = runner.length
        cache = drafter.new_cache(B, T + 64)
        dtype = drafter.fc.weight.dtype
        feats = torch.zeros(B, T, drafter.config.fc_in_features, device=dev, dtype=dtype)
        drafter.step(ids, drafter.fuse(feats), cache, 0)
        cache.advance(T)
        h = torch.zeros(B, 1, drafter.config.hidden_size, device=dev, dtype=dtype)
        pos = cache.pos
        for _ in range(reps):                  # verify at each k and the drafter step interleaved
            for k in ks:
                times[k].append(_timed(lambda: runner.forward(tok.repeat(1, k + 1)), dev))
                runner.rollback(n)
            times["t_draft"].append(_timed(lambda: drafter.step(tok, h, cache, pos), dev))
            cache.rollback(pos)
