"""Tests for eagle_nb.model.kv_cache: the drafter's explicit-position cache (no model needed) and the
rollback helper for the target's HF cache (a tiny stock Llama).
"""
from __future__ import annotations

import pytest
import torch

from eagle_nb.model.kv_cache import KVCache, hf_cache_len, hf_cache_rollback
from helpers import cache_kwarg, output_cache, tiny_llama

B, HKV, D, MAX = 2, 2, 4, 8


def _kv(T: int, fill: float):
    """k, v of shape (B, Hkv, T, D) whose values identify the write: k = fill + t, v = -k."""
    k = (fill + torch.arange(T, dtype=torch.float32)).view(1, 1, T, 1).expand(B, HKV, T, D).clone()
    return k, -k


def test_update_writes_at_explicit_positions_and_returns_prefix_views():
    """update(layer, start, k, v) stores k/v at slots start..start+T-1 of that layer only and
    returns views of slots 0..start+T-1 (the cache's own storage, not copies)."""
    c = KVCache(2, B, MAX, HKV, D)
    k0, v0 = _kv(3, 10.0)
    k, v = c.update(0, 0, k0, v0)
    assert k.shape == (B, HKV, 3, D) and v.shape == (B, HKV, 3, D)
    torch.testing.assert_close(k, k0)
    torch.testing.assert_close(v, v0)
    assert c.pos == 0, "update must not move pos; advance does"
    c.advance(3)
    k1, v1 = _kv(2, 100.0)
    k, v = c.update(0, 3, k1, v1)
    assert k.shape[2] == 5
    torch.testing.assert_close(k, torch.cat([k0, k1], dim=2))
    torch.testing.assert_close(v, torch.cat([v0, v1], dim=2))
    assert k.data_ptr() == c.k[0].data_ptr(), "update should return a view of the cache storage"
    assert torch.all(c.k[1] == 0), "writing layer 0 touched layer 1"
    assert torch.all(c.k[0, :, :, 5:] == 0), "slots past the write were touched"


def test_rollback_forgets_positions_and_next_write_overwrites():
    """rollback(p) sets pos = p; a write at p then overwrites the stale slots and the returned
    view ends at the new end, so no stale entry beyond it is visible."""
    c = KVCache(1, B, MAX, HKV, D)
    c.update(0, 0, *_kv(5, 0.0))
    c.advance(5)
    c.rollback(2)
    assert c.pos == 2
    new_k, new_v = _kv(1, 50.0)
    k, v = c.update(0, 2, new_k, new_v)
    assert k.shape[2] == 3
    torch.testing.assert_close(k[:, :, :2], _kv(2, 0.0)[0])
    torch.testing.assert_close(k[:, :, 2:], new_k)
    torch.testing.assert_close(v[:, :, 2:], new_v)
    c.rollback(0)
    assert c.pos == 0
    c.reset()
    assert c.pos == 0


def test_write_that_leaves_a_hole_is_refused():
    """Writing at start > pos would leave unwritten slots inside the attended prefix: ValueError."""
    c = KVCache(1, B, MAX, HKV, D)
    c.update(0, 0, *_kv(2, 0.0))
    c.advance(2)
    with pytest.raises(ValueError, match="hole"):
        c.update(0, 3, *_kv(1, 0.0))
    c.update(0, 2, *_kv(1, 0.0))  # exactly at pos is fine


def test_overflow_is_refused():
    """A write ending past max_len raises ValueError naming the overflow; one ending at max_len passes."""
    c = KVCache(1, B, MAX, HKV, D)
    with pytest.raises(ValueError, match="overflow"):
        c.update(0, 0, *_kv(MAX + 1, 0.0))
    c.update(0, 0, *_kv(MAX, 0.0))


@pytest.mark.parametrize("to_pos", [-1, 4])
def test_rollback_outside_committed_range_is_refused(to_pos):
    """rollback(p) needs 0 <= p <= pos: rolling 'forward' past pos or below 0 is an error."""
    c = KVCache(1, B, MAX, HKV, D)
    c.update(0, 0, *_kv(3, 0.0))
    c.advance(3)
    with pytest.raises(ValueError, match="roll back"):
        c.rollback(to_pos)
    assert c.pos == 3


def test_hf_cache_rollback_crops_exactly_and_matches_uncached_forward():
    """hf_cache_rollback on a transformers DynamicCache leaves exactly `to_len` positions, and a
    forward continuing from the cropped cache gives the same logits as an uncached forward over
    the committed ids plus the new ones."""
    model = tiny_llama(num_layers=2)
    kw = cache_kwarg(model)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 128, (1, 9), generator=g)
    with torch.no_grad():
        cache = output_cache(model(ids, use_cache=True))
        assert hf_cache_len(cache) == 9
        hf_cache_rollback(cache, 5)                  # reject the last 4 positions
        assert hf_cache_len(cache) == 5
        for layer in cache.layers:
            assert layer.keys.shape[-2] == 5 and layer.values.shape[-2] == 5
        new = torch.randint(3, 128, (1, 2), generator=g)
        pos = torch.arange(5, 7)[None]
        cached = model(new, position_ids=pos, use_cache=True, **{kw: cache}).logits
        full = model(torch.cat([ids[:, :5], new], dim=1), use_cache=False).logits[:, 5:]
    torch.testing.assert_close(cached, full, atol=1e-5, rtol=1e-5)
    hf_cache_rollback(cache, 7)  # no-op at the current length
    assert hf_cache_len(cache) == 7
    with pytest.raises(ValueError):
        hf_cache_rollback(cache, 8)
    assert hf_cache_len(None) == 0
