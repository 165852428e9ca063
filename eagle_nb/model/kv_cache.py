"""A pre-allocated KV cache with explicit positions (the drafter's; the target uses HF's cache).

Slot index == token position. Rejecting drafts is a position rewind (`rollback`), never a copy:
stale slots are overwritten by the next write and hidden by the attention mask until then.
Tree drafts (loop/tree.py) write their frontier nodes into slots after the committed prefix and are
rolled back the same way. For the target's HF cache: length, rollback (`crop`) and, after a tree
verify, `hf_cache_keep` (compaction of the accepted, non-contiguous path). Knows nothing about models.
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


def hf_cache_keep(cache, start: int, keep) -> None:
    """Keep the positions `start + keep[j]` of an HF `Cache` at `start + j` and drop everything
    after `start + len(keep)`: the compaction after a tree verify, where the accepted path is a
    non-contiguous subset of the verified nodes. `keep` (offsets from `start`) must increase and
    start with 0. A contiguous `keep` (a chain) is a plain rollback. Only full-attention
    `DynamicLayer`s can be compacted; anything else (sliding window, quantized, static, linear
    attention) is refused by name, never silently mis-compacted."""
    keep = [int(i) for i in keep]
    total = hf_cache_len(cache)
    if not keep or keep[0] != 0 or any(b <= a for a, b in zip(keep, keep[1:])) \
            or start + keep[-1] >= total:
        raise ValueError(f"cannot keep offsets {keep} after position {start}: the cache holds {total}")
    if keep == list(range(len(keep))):
        hf_cache_rollback(cache, start + len(keep))
        return
    for k, v, set_kv in _hf_layers(cache):
        idx = torch.tensor(keep, device=k.device) + start                 # (m,) source positions
        set_kv(torch.cat([k[..., :start, :], k[..., idx, :]], dim=-2),    # (B, Hkv, start+m, D)
               torch.cat([v[..., :start, :], v[..., idx, :]], dim=-2))


def _hf_layers(cache):
    """(keys, values, setter) per layer of a transformers 5 (`cache.layers`) or 4.x
    (`key_cache`/`value_cache`) dynamic cache; refuses layer types it cannot compact."""
    if hasattr(cache, "layers"):
        from transformers.cache_utils import DynamicLayer
        out = []
        for i, layer in enumerate(cache.layers):
            if type(layer) is not DynamicLayer:
                raise TypeError(f"tree verification cannot compact cache layer {i} of type "
                                f"{type(layer).__name__} (only full-attention DynamicLayer)")

            def set_kv(k, v, layer=layer):
                layer.keys, layer.values = k, v
            out.append((layer.keys, layer.values, set_kv))
        return out
    if hasattr(cache, "key_cache"):
        out = []
        for i in range(len(cache.key_cache)):
            def set_kv(k, v, i=i):
                cache.key_cache[i], cache.value_cache[i] = k, v
            out.append((cache.key_cache[i], cache.value_cache[i], set_kv))
        return out
    raise TypeError(f"cannot compact a {type(cache).__name__}: no `layers` or `key_cache`")
