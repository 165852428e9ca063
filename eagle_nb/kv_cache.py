"""A pre-allocated KV cache with explicit positions (the drafter's; the target uses HF's cache).

Slot index == token position. Rejecting drafts is a position rewind (`rollback`), never a copy:
stale slots are overwritten by the next write and hidden by the attention mask until then.
Knows nothing about models.
"""
from __future__ import annotations

import torch


class KVCache:
    def __init__(self, n_layers: int, batch_size: int, max_len: int, n_kv_heads: int,
                 head_dim: int, device=None, dtype=torch.float32):
        shape = (n_layers, batch_size, n_kv_heads, max_len, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.max_len = max_len
        self.pos = 0  # number of committed positions (next write goes here)

    def update(self, layer: int, start: int, k: torch.Tensor, v: torch.Tensor):
        """Write k, v (B, Hkv, T, D) at positions start..start+T-1 of `layer`; return the views of
        positions 0..start+T-1. Does not move `pos` (call `advance` once all layers wrote)."""
        end = start + k.shape[2]
        if start > self.pos:
            raise ValueError(f"KVCache write at {start} leaves a hole (pos={self.pos})")
        if end > self.max_len:
            raise ValueError(f"KVCache overflow: positions up to {end} > max_len {self.max_len}")
        self.k[layer, :, :, start:end] = k
        self.v[layer, :, :, start:end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]

    def advance(self, to_pos: int) -> None:
        self.pos = to_pos

    def rollback(self, to_pos: int) -> None:
        """Forget positions >= to_pos."""
        if not 0 <= to_pos <= self.pos:
            raise ValueError(f"cannot roll back to {to_pos} (pos={self.pos})")
        self.pos = to_pos

    def reset(self) -> None:
        self.pos = 0


def hf_cache_len(cache) -> int:
    return 0 if cache is None else int(cache.get_seq_length())


def hf_cache_rollback(cache, to_len: int) -> None:
    """Roll an HF `Cache` back to `to_len` positions. A negative `crop` argument removes that many
    tokens in both transformers 4.x and 5.x (their positive-argument meanings differ)."""
    n = hf_cache_len(cache) - to_len
    if n < 0:
        raise ValueError(f"cannot roll the target cache back to {to_len}: it holds {hf_cache_len(cache)}")
    if n:
        cache.crop(-n)
