"""A draft layer with `layer_types: ["sliding_attention"]` and `sliding_window` W: read from the
config (both spellings), honoured by the attention (each query sees its last W positions, with
or without the KV cache), refused where it cannot be honoured (tree and training layouts past
W), kept by save/convert to speculators and refused by formats whose consumers ignore it."""
from __future__ import annotations

import pytest
import torch
from helpers import target_for, tiny_drafter

from eagle_nb.checkpoints.convert import convert
from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.checkpoints.save import save_drafter
from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.model.config import ConfigError, from_llama_dict

W = 4
BASE = {"hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64, "vocab_size": 128}


@pytest.mark.parametrize("extra, window", [
    ({"layer_types": ["sliding_attention"], "sliding_window": 7}, 7),
    ({"layer_types": ["full_attention"], "sliding_window": 7}, None),
    ({"use_sliding_window": True, "sliding_window": 7, "max_window_layers": 0}, 7),
    ({"use_sliding_window": True, "sliding_window": 7, "max_window_layers": 28}, None),  # Qwen2: layer 0 < 28
    ({"use_sliding_window": False, "sliding_window": 7}, None),
    ({"sliding_window": None, "use_sliding_window": False}, None),                     # SpecForge Kimi
])
def test_window_is_read_from_either_spelling(extra, window):
    assert from_llama_dict({**BASE, **extra}, "cfg").sliding_window == window


@pytest.mark.parametrize("extra, phrase", [
    ({"layer_types": ["sliding_attention"]}, "sliding_window is not set"),
    ({"layer_types": ["sliding_attention", "full_attention"], "sliding_window": 4}, "one draft layer"),
    ({"layer_types": ["chunked_attention"], "sliding_window": 4}, "layer_types must list"),
    ({"layer_types": ["sliding_attention"], "sliding_window": "4"}, "sliding_window must be an integer"),
])
def test_bad_window_configs_are_named(extra, phrase):
    with pytest.raises(ConfigError, match=phrase):
        from_llama_dict({**BASE, **extra}, "cfg")


def _inputs(d, T, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, d.config.vocab_size, (1, T), generator=g),
            torch.randn(1, T, d.config.hidden_size, generator=g))


def test_each_query_sees_its_last_w_positions():
    """RoPE is relative, so position p under the window equals full attention over positions
    p-W+1..p alone; with the KV cache, one token at a time, the same."""
    d = tiny_drafter(seed=3, sliding_window=W).eval()
    full = tiny_drafter(seed=3).eval()
    ids, g = _inputs(d, 10)
    with torch.no_grad():
        out = d.step(ids, g)[0]
        for p in range(10):
            lo = max(0, p - W + 1)
            ref = full.step(ids[:, lo:p + 1], g[:, lo:p + 1])[0][:, -1]
            torch.testing.assert_close(out[:, p], ref, rtol=1e-5, atol=1e-5)
        cache, stepped = d.new_cache(1, 16), []
        for t in range(10):
            stepped.append(d.step(ids[:, t:t + 1], g[:, t:t + 1], cache, start=t)[0])
            cache.advance(t + 1)
        stepped = torch.cat(stepped, 1)
    torch.testing.assert_close(stepped, out, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(out[:, W:], full.step(ids, g)[0][:, W:], atol=1e-3)   # it matters


def test_explicit_masks_past_the_window_are_refused():
    d = tiny_drafter(sliding_window=W)
    ids, g = _inputs(d, W + 1)
    mask = torch.ones(W + 1, W + 1, dtype=torch.bool).tril()
    with pytest.raises(ValueError, match=rf"sliding_window {W}.*tree and training-time layouts"):
        d.step(ids, g, mask=mask)
    d.step(ids[:, :W], g[:, :W], mask=mask[:W, :W])      # within the window: nothing to refuse


def test_window_survives_speculators_and_is_refused_where_ignored(tmp_path):
    d = tiny_drafter(sliding_window=W)
    src = save_drafter(d, tmp_path / "c", "speculators")
    target = target_for(d)
    assert load_drafter(src).config.sliding_window == W
    for to in ("sglang", "eagle"):
        with pytest.raises(CheckpointError, match=rf"sliding_window={W}"):
            convert(src, tmp_path / to, to, target=target)
    out = convert(src, tmp_path / "c2", "speculators", target=target)
    assert load_drafter(out).config.sliding_window == W
