"""Tiny, seeded, CPU-only builders shared by the tests: a drafter with non-trivial weights and a
valid vocabulary map, and a stock HF Llama target. Nothing here asserts anything.

Sizes follow STYLE.md rule 12: hidden 32, vocab 128, a handful of layers.
"""
from __future__ import annotations

import inspect

import torch
import transformers as tf

from eagle_nb.config import DrafterConfig
from eagle_nb.drafter import Eagle3Drafter

H, V, VD = 32, 128, 64       # drafter width, target vocab, draft vocab
AUX_HF = [2, 4, 5]           # aux layer ids (HF hidden_states convention) for an 8-layer target


def tiny_drafter_config(**overrides) -> DrafterConfig:
    """A small valid DrafterConfig: GQA (4 heads, 2 kv heads), 3 aux layers, Vd < V."""
    kw = dict(hidden_size=H, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
              vocab_size=V, draft_vocab_size=VD, aux_layer_ids=list(AUX_HF), rms_norm_eps=1e-6,
              max_position_embeddings=64)
    kw.update(overrides)
    return DrafterConfig(**kw)


def vocab_map(vocab: int, draft_vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) as the public builders make them: `draft_vocab` distinct target ids, sorted,
    stored as int64 offsets `selected[i] - i`, plus the bool mask of the selected ids."""
    g = torch.Generator().manual_seed(seed)
    selected = torch.randperm(vocab, generator=g)[:draft_vocab].sort().values
    d2t = (selected - torch.arange(draft_vocab)).to(torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[selected] = True
    return d2t, t2d


@torch.no_grad()
def randomize_(module: torch.nn.Module, seed: int = 0, std: float = 0.2) -> torch.nn.Module:
    """Overwrite every floating parameter with N(0, std) (norm weights: 1 + N(0, std)), so logits
    are far from flat and a wrong wiring changes them visibly."""
    g = torch.Generator().manual_seed(seed)
    for name, p in module.named_parameters():
        noise = torch.randn(p.shape, generator=g) * std
        p.copy_(1.0 + noise if "norm" in name else noise)
    return module


def tiny_drafter(seed: int = 0, vocab: int = V, draft_vocab: int = VD, **cfg_overrides) -> Eagle3Drafter:
    """An eval-mode float32 Eagle3Drafter with random weights (std 0.2) and a valid, non-identity
    d2t/t2d when draft_vocab < vocab."""
    cfg = tiny_drafter_config(vocab_size=vocab, draft_vocab_size=draft_vocab, **cfg_overrides)
    torch.manual_seed(seed)
    d = Eagle3Drafter(cfg)
    randomize_(d, seed)
    if draft_vocab < vocab:
        d2t, t2d = vocab_map(vocab, draft_vocab, seed)
        d.d2t.copy_(d2t)
        d.t2d.copy_(t2d)
    return d.eval()


def tiny_features(drafter: Eagle3Drafter, B: int = 2, T: int = 7, seed: int = 0):
    """Random (input_ids (B, T), target_features (B, T, n_aux*Ht)) for `drafter`."""
    g = torch.Generator().manual_seed(seed)
    c = drafter.config
    ids = torch.randint(0, c.vocab_size, (B, T), generator=g)
    feats = torch.randn(B, T, c.fc_in_features, generator=g)
    return ids, feats


def tiny_llama(num_layers: int = 8, hidden: int = 32, vocab: int = 128, seed: int = 0):
    """A stock HF LlamaForCausalLM (eval, float32) from a tiny random config."""
    cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(seed)
    return tf.LlamaForCausalLM(cfg).eval()


def target_for(drafter: Eagle3Drafter, num_layers: int = 8, seed: int = 0):
    """A tiny Llama target whose input embedding equals the drafter's `embed_tokens`, so formats
    that do not store the embedding (A, B) reload to the same drafter."""
    c = drafter.config
    t = tiny_llama(num_layers, c.target_hidden_size, c.vocab_size, seed)
    with torch.no_grad():
        t.get_input_embeddings().weight.copy_(drafter.embed_tokens.weight)
    return t


def cache_kwarg(model) -> str:
    """Name of the forward kwarg carrying the KV cache: `cache` (transformers 5) or
    `past_key_values` (4.x)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def output_cache(out):
    """The returned cache of an HF forward, whichever attribute name this version uses."""
    return out["cache"] if "cache" in out else out["past_key_values"]


# -- rendered reports in a real browser ----------------------------------------------------------
def _chromium_mark():
    import pytest

    from eagle_nb import report
    return pytest.mark.skipif(report.find_chromium() is None,
                              reason="chromium not installed (Debian: apt-get install chromium)")


needs_chromium = _chromium_mark()


def shown_states(dom: str) -> list[str]:
    """data-state of every precomputed switcher state the browser left visible."""
    import re
    return [k.replace("&amp;", "&") for k, hidden in
            re.findall(r'class="enb-state" data-state="([^"]+)"( hidden(?:="")?)?', dom) if not hidden]
