"""The training-time-test (TTT) layout of EAGLE-3 (arXiv 2503.01840): `steps` unrolled draft steps
over every position of a sequence at once, each step a call of the drafter's own `step`.

Column t of step j pairs token t+1+j with the step-(j-1) state of column t (step 0: the fused
target features of token t) at RoPE position t+j, attends to the step-0 keys of columns <= t and
to its own column's keys of steps 1..j, and predicts token t+j+2. When the tokens fed are the ones
the drafter itself proposed, this is exactly what cached chain drafting computes from position t
(tests/train/test_train_drafter.py), so one unrolled pass gives the drafts of every position together:
the trainer (train/drafter.py) trains on it, the one-pass acceptance (loop/onepass.py) measures with it.

Right padding needs no mask: a column only sees columns to its left. Two layouts compute the
same attention: `DiagonalKeys` (the default, as SpecForge computes it: a causal block over the
step-0 keys plus one diagonal term per later step, no mask built) and `StepKeys` with the dense
`ttt_mask` (the reference; step j's scores are T x (j+1)T instead of T x (T+j)). Knows nothing
about targets, losses or acceptance; it supplies the key layouts and nothing else.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from eagle_nb.model.drafter import FC_STRICT

LAYOUTS = ("diagonal", "dense")


class StepKeys:
    """The key store of the training-time test, in the drafter's cache protocol (`update`): every
    unrolled step appends its keys (B, nkv, T, hd) beside the earlier steps' and attention sees
    them all, under the mask `ttt_mask` lays out."""

    def __init__(self):
        self.k, self.v = [], []

    def update(self, layer: int, start: int, k, v):
        self.k.append(k)
        self.v.append(v)
        return torch.cat(self.k, 2), torch.cat(self.v, 2)


class DiagonalKeys:
    """The training-time test's keys, attended without a mask (Attention calls `attend`): step 0
    is plain causal attention; at step j the queries (columns first..T-1) see the step-0 keys of
    columns <= their own (a causal block) and, per step 1..j, the key of their own column (a
    diagonal term), under one softmax."""

    def __init__(self, first: int = 0):
        self.first, self.k, self.v = first, [], []

    def attend(self, q, k, v):
        # q (B, nh, Tq, hd); k, v (B, nkv, Tq, hd) of this step
        self.k.append(k)
        self.v.append(v)
        B, nh, Tq, hd = q.shape
        nkv = k.shape[1]
        if len(self.k) == 1:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=nkv != nh)
        qg = q.view(B, nkv, nh // nkv, Tq, hd) * hd ** -0.5              # head h reads kv head h // g
        k0, v0 = self.k[0], self.v[0]                                    # (B, nkv, T, hd)
        T = k0.shape[2]
        block = torch.einsum("bkgqd,bksd->bkgqs", qg, k0)                # (B, nkv, g, Tq, T)
        later = torch.arange(T, device=q.device)[None, :] > \
            torch.arange(T - Tq, T, device=q.device)[:, None]
        block = block.masked_fill(later, float("-inf"))
        kd, vd = torch.stack(self.k[1:], 3), torch.stack(self.v[1:], 3)  # (B, nkv, Tq, j, hd)
        diag = torch.einsum("bkgqd,bkqjd->bkgqj", qg, kd)                # (B, nkv, g, Tq, j)
        p = torch.cat([block, diag], -1).float().softmax(-1).to(v0.dtype)
        y = torch.einsum("bkgqs,bksd->bkgqd", p[..., :T], v0) + \
            torch.einsum("bkgqj,bkqjd->bkgqd", p[..., T:], vd)
        return y.reshape(B, nh, Tq, hd)


def ttt_mask(T: int, j: int, device=None, first: int = 0) -> torch.Tensor:
    """(T - first, T + j*(T - first)) bool for step j over columns first..T-1 (step 0: all T
    columns): column t sees step-0 keys of columns <= t (causal) and its own column's keys of
    steps 1..j (a diagonal per step)."""
    rows = torch.arange(first if j else 0, T, device=device)
    causal = torch.arange(T, device=device)[None, :] <= rows[:, None]
    eye = torch.eye(T - first, dtype=torch.bool, device=device)
    return torch.cat([causal] + [eye] * j, 1)


def ttt_steps(drafter, ids: torch.Tensor, g: torch.Tensor, steps: int,
              first: int = 0, layout: str = "diagonal") -> Iterator[torch.Tensor]:
    """Yield the draft logits of steps 0..steps-1, one at a time (so a caller can reduce each to
    what it needs before the next is computed): step 0 over every column (B, T, Vd), later steps
    over columns first..T-1 only (B, T - first, Vd); their keys still see every step-0 column.
    ids (B, T+steps) are the tokens fed; g (B, T, H) the fused target state of tokens 0..T-1.
    `layout` "diagonal" (default) or "dense" (the masked reference) computes the same attention."""
    if layout not in LAYOUTS:
        raise ValueError(f"TTT layout {layout!r}: choose one of {LAYOUTS}")
    T = g.shape[1]
    keys = DiagonalKeys(first) if layout == "diagonal" else StepKeys()
    for j in range(steps):
        a = first if j else 0
        mask = ttt_mask(T, j, ids.device, first) if layout == "dense" else None
        logits, g = drafter.step(ids[:, a + 1 + j:1 + j + T], g, keys, start=a + j, mask=mask)
        if j == 0:
            g = g[:, first:]
        yield logits


def ttt_forward(drafter, ids: torch.Tensor, feats: torch.Tensor, steps: int,
                fc_policy: str = FC_STRICT, layout: str = "diagonal") -> list[torch.Tensor]:
    """Unrolled draft steps over a batch. ids (B, T+steps) are data tokens; feats (B, T, n*Ht) the
    target features of tokens 0..T-1. Returns a list of draft logits (B, T, Vd), one per step."""
    return list(ttt_steps(drafter, ids, drafter.fuse(feats, fc_policy), steps, layout=layout))
