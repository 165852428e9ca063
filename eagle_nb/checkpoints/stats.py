"""Statistics over a drafter's tensors, streamed: each tensor is read in bounded chunks
(io/lazy_weights.py `stream`), so the doctor measures a 1T-target drafter in about one chunk of
memory. Works on memory-mapped `LazyState`s and on in-memory state dicts alike.
"""
from __future__ import annotations

import torch

from eagle_nb.io.lazy_weights import CHUNK_BYTES, stream

EMBED = "embed_tokens.weight"


def abs_max(state: dict) -> float:
    """max |w| over every floating tensor (float32 arithmetic, one chunk at a time)."""
    m = 0.0
    for k, v in state.items():
        if v.is_floating_point():
            for c in stream(state, k):
                m = max(m, float(c.float().abs().max())) if c.numel() else m
    return m


def embedding_agreement(a: dict, b: dict) -> tuple[float, float]:
    """(relative L2 difference |a-b|/|b|, mean row cosine) of two (V, H) embeddings `a[EMBED]`,
    `b[EMBED]`, read in blocks of whole rows."""
    V, H = a[EMBED].shape
    rows = max(1, (CHUNK_BYTES // 4) // H)
    ca = stream(a, EMBED, rows * H * a[EMBED].element_size())
    cb = stream(b, EMBED, rows * H * b[EMBED].element_size())
    diff2 = ref2 = cos_sum = 0.0
    for x, y in zip(ca, cb, strict=True):
        x, y = x.float().view(-1, H), y.float().view(-1, H)
        diff2 += float((x - y).pow(2).sum())
        ref2 += float(y.pow(2).sum())
        cos_sum += float(torch.nn.functional.cosine_similarity(x, y, dim=-1).sum())
    return diff2 ** 0.5 / max(ref2 ** 0.5, 1e-12), cos_sum / max(V, 1)
