"""Tests for eagle_nb.model.drafter: the EAGLE-3 draft model against an independent slow reference,
cached vs uncached equality, rollback, the explicit fc policy, the d2t mapping and RoPE.

The reference forward below is written from docs/drafter.md with explicit per-batch,
per-head loops and its own RMSNorm / RoPE (rotate-half, as HF Llama) / causal softmax / GQA; it
shares no code with eagle_nb.model.drafter. Tiny random drafters come from tests/helpers.py.
"""
from __future__ import annotations

import math
import re

import pytest
import torch
import transformers as tf
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import eagle_nb.model.drafter as dr
from eagle_nb.model.config import ConfigError
from helpers import tiny_drafter, tiny_drafter_config, tiny_features

ATOL = 1e-5
FLAGS = [None, "norm_before_fc", "fc_norm", "norm_before_residual", "norm_output"]


# -- independent slow reference -------------------------------------------------------------------
def ref_rms(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def ref_rope(x, positions, theta):
    """x (T, hd) for one head; HF Llama convention: pair dim i with dim i + hd/2."""
    T, hd = x.shape
    half = hd // 2
    out = torch.empty_like(x)
    for t in range(T):
        for i in range(half):
            ang = positions[t] * theta ** (-2.0 * i / hd)
            c, s = math.cos(ang), math.sin(ang)
            a, b = x[t, i].item(), x[t, i + half].item()
            out[t, i] = a * c - b * s
            out[t, i + half] = b * c + a * s
    return out


def ref_attention(p, cfg, x, start):
    """Causal multi-head attention over x (B, T, 2H) at positions start.. with no cache."""
    B, T, _ = x.shape
    nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    q = torch.einsum("btc,oc->bto", x, p["midlayer.self_attn.q_proj.weight"]).reshape(B, T, nh, hd)
    k = torch.einsum("btc,oc->bto", x, p["midlayer.self_attn.k_proj.weight"]).reshape(B, T, nkv, hd)
    v = torch.einsum("btc,oc->bto", x, p["midlayer.self_attn.v_proj.weight"]).reshape(B, T, nkv, hd)
    positions = list(range(start, start + T))
    out = torch.zeros(B, T, nh, hd)
    for b in range(B):
        for h in range(nh):
            kv = h // (nh // nkv)                    # GQA: query head h reads kv head h // group
            qh = ref_rope(q[b, :, h], positions, cfg.rope_theta)
            kh = ref_rope(k[b, :, kv], positions, cfg.rope_theta)
            for i in range(T):
                scores = torch.tensor([float(qh[i] @ kh[j]) / math.sqrt(hd) if j <= i else -math.inf
                                       for j in range(T)])
                w = torch.exp(scores - scores.max())
                w = w / w.sum()
                out[b, i, h] = (w[:, None] * v[b, :, kv]).sum(0)
    return torch.einsum("btc,oc->bto", out.reshape(B, T, nh * hd), p["midlayer.self_attn.o_proj.weight"])


def ref_step(p, cfg, ids, g, start=0):
    """docs/drafter.md: residual g; x = cat[input_layernorm(embed), hidden_norm(g)]; attn; +residual;
    +mlp(post_attention_layernorm); logits = lm_head(norm(h)); next state pre-norm (or post-norm)."""
    eps = cfg.rms_norm_eps
    e = p["embed_tokens.weight"][ids]
    gn = ref_rms(g, p["midlayer.hidden_norm.weight"], eps)
    residual = gn if cfg.norm_before_residual else g
    x = torch.cat([ref_rms(e, p["midlayer.input_layernorm.weight"], eps), gn], dim=-1)
    h1 = residual + ref_attention(p, cfg, x, start)
    n = ref_rms(h1, p["midlayer.post_attention_layernorm.weight"], eps)
    gate = n @ p["midlayer.mlp.gate_proj.weight"].T
    up = n @ p["midlayer.mlp.up_proj.weight"].T
    h2 = h1 + (gate * torch.sigmoid(gate) * up) @ p["midlayer.mlp.down_proj.weight"].T
    hn = ref_rms(h2, p["norm.weight"], eps)
    return hn @ p["lm_head.weight"].T, (hn if cfg.norm_output else h2)


def ref_fuse(p, cfg, feats):
    x = feats
    if cfg.fc_norm:
        Ht = cfg.target_hidden_size
        x = torch.cat([ref_rms(x[..., i * Ht:(i + 1) * Ht], p[f"fc_norm.{i}.weight"], cfg.rms_norm_eps)
                       for i in range(cfg.num_aux)], dim=-1)
    if cfg.norm_before_fc:
        x = ref_rms(x, p["input_norm.weight"], cfg.rms_norm_eps)
    return x @ p["fc.weight"].T


def ref_forward(drafter, ids, feats):
    p = {k: v.detach() for k, v in drafter.state_dict().items()}
    return ref_step(p, drafter.config, ids, ref_fuse(p, drafter.config, feats))


# -- reference equality ---------------------------------------------------------------------------
@pytest.mark.parametrize("flag", FLAGS, ids=lambda f: f or "default")
def test_forward_equals_independent_reference(flag):
    """drafter(input_ids, target_features) returns the same draft logits and next-step state as
    the plain reference forward (docs/drafter.md order), for the default layout and each variant flag."""
    d = tiny_drafter(seed=1, **({flag: True} if flag else {}))
    ids, feats = tiny_features(d, B=2, T=5, seed=2)
    with torch.no_grad():
        logits, state = d(ids, feats)
    ref_logits, ref_state = ref_forward(d, ids, feats)
    assert logits.shape == (2, 5, d.config.draft_vocab_size)
    assert ref_logits.std() > 0.5, "logits too flat for the comparison to mean much"
    torch.testing.assert_close(logits, ref_logits, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(state, ref_state, atol=ATOL, rtol=1e-5)


def test_variant_flags_change_the_output():
    """Each flag actually changes the computation (so the parametrised equality above is not
    vacuous): same weights, flag on vs off, different logits or state."""
    base = tiny_drafter(seed=1)
    ids, feats = tiny_features(base, B=1, T=4, seed=2)
    with torch.no_grad():
        ref = base(ids, feats)
        for flag in FLAGS[1:]:
            d = tiny_drafter(seed=1, **{flag: True})
            d.load_state_dict(base.state_dict(), strict=False)  # extra norms keep their random init
            out = d(ids, feats)
            differs = not torch.allclose(out[0], ref[0], atol=1e-4) or \
                not torch.allclose(out[1], ref[1], atol=1e-4)
            assert differs, f"{flag}=True computes the same as the default"


# -- cache ----------------------------------------------------------------------------------------
def _uncached(d, ids, g):
    with torch.no_grad():
        return d.step(ids, g)


@pytest.mark.parametrize("prefix", [4, 510])
def test_cached_incremental_equals_uncached(prefix):
    """A prefix step with a KVCache, then chunks of 1 and 3 tokens at explicit start positions,
    gives the same logits and states as one uncached causal step over the whole sequence (prefix
    510 also crosses the drafter's first 512-position RoPE table)."""
    d = tiny_drafter(seed=3)
    T = prefix + 4
    ids, feats = tiny_features(d, B=2, T=T, seed=4)
    with torch.no_grad():
        g = d.fuse(feats)
        cache = d.new_cache(2, T + 2)
        outs = []
        for a, b in [(0, prefix), (prefix, prefix + 1), (prefix + 1, T)]:
            lo, st = d.step(ids[:, a:b], g[:, a:b], cache, start=a)
            cache.advance(b)
            outs.append((lo, st))
        full_logits, full_state = d.step(ids, g)
    torch.testing.assert_close(torch.cat([o[0] for o in outs], 1), full_logits, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(torch.cat([o[1] for o in outs], 1), full_state, atol=ATOL, rtol=1e-5)
    assert cache.pos == T


@pytest.mark.parametrize("chunk", [1, 3])
def test_rollback_then_rewrite_equals_fresh_run(chunk):
    """Write 4 speculative positions after a prefix, roll back to the prefix, write different
    tokens/states: the result equals a fresh run over prefix + the new tokens (stale slots never
    leak into attention)."""
    d = tiny_drafter(seed=5)
    ids, feats = tiny_features(d, B=1, T=5 + chunk, seed=6)
    junk_ids, junk_feats = tiny_features(d, B=1, T=4, seed=7)
    with torch.no_grad():
        g, junk_g = d.fuse(feats), d.fuse(junk_feats)
        cache = d.new_cache(1, 16)
        d.step(ids[:, :5], g[:, :5], cache, 0)
        cache.advance(5)
        d.step(junk_ids, junk_g, cache, 5)            # rejected drafts
        cache.advance(9)
        cache.rollback(5)
        lo, st = d.step(ids[:, 5:], g[:, 5:], cache, 5)
        fresh_lo, fresh_st = d.step(ids, g)
    torch.testing.assert_close(lo, fresh_lo[:, 5:], atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(st, fresh_st[:, 5:], atol=ATOL, rtol=1e-5)


def test_recurrent_state_step_matches_reference():
    """A later draft step fed the drafter's own H-wide state through step() (no fc) equals the
    reference step at the same positions."""
    d = tiny_drafter(seed=8)
    ids, feats = tiny_features(d, B=1, T=3, seed=9)
    with torch.no_grad():
        _, state = d(ids, feats)
        lo, st = d.step(ids, state)
    p = {k: v.detach() for k, v in d.state_dict().items()}
    rlo, rst = ref_step(p, d.config, ids, state)
    torch.testing.assert_close(lo, rlo, atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(st, rst, atol=ATOL, rtol=1e-5)


def test_explicit_start_positions_beyond_first_rope_table():
    """An uncached step at an explicit start past the first RoPE table (which must grow) equals
    the reference at those positions. NOTE: a uniform position shift leaves q.k unchanged, so
    this guards table growth/slicing; the cached test below is what pins absolute positions."""
    d = tiny_drafter(seed=10)
    ids, feats = tiny_features(d, B=1, T=3, seed=11)
    p = {k: v.detach() for k, v in d.state_dict().items()}
    with torch.no_grad():
        g = d.fuse(feats)
        d.step(ids, g, start=0)                     # builds the first RoPE table
        for start in (5, 700, 2000):
            lo, st = d.step(ids, g, start=start)
            rlo, rst = ref_step(p, d.config, ids, g, start=start)
            torch.testing.assert_close(lo, rlo, atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(st, rst, atol=1e-4, rtol=1e-4)


# -- fc policy ------------------------------------------------------------------------------------
@pytest.mark.parametrize("mult", [1, 2])
def test_strict_fuse_refuses_wrong_width_naming_both(mult):
    """The default policy raises ValueError naming the received width and the expected
    n_aux*Ht width when given H- or 2H-wide features (a missing capture never passes silently)."""
    d = tiny_drafter(seed=0)
    H, want = d.config.hidden_size, d.config.fc_in_features
    with pytest.raises(ValueError) as ei:
        d.fuse(torch.randn(1, 3, mult * H))
    msg = str(ei.value)
    assert re.search(rf"\b{mult * H}\b", msg) and re.search(rf"\b{want}\b", msg), msg
    with pytest.raises(ValueError):
        d(torch.zeros(1, 3, dtype=torch.long), torch.randn(1, 3, mult * H))


def test_engine_width_check_fault_skips_fc_only_for_h_wide():
    """With FC_ENGINE_WIDTH_CHECK an H-wide input is returned unchanged (fc silently skipped, the
    engines' behaviour), while an n_aux*Ht-wide input still goes through fc; an unknown policy
    name is refused."""
    d = tiny_drafter(seed=0)
    x = torch.randn(1, 3, d.config.hidden_size)
    assert d.fuse(x, dr.FC_ENGINE_WIDTH_CHECK) is x
    feats = torch.randn(1, 3, d.config.fc_in_features)
    with torch.no_grad():
        torch.testing.assert_close(d.fuse(feats, dr.FC_ENGINE_WIDTH_CHECK), feats @ d.fc.weight.T)
    with pytest.raises(ValueError, match="unknown fc_policy"):
        d.fuse(feats, "lenient")
        with pytest.raises(ValueError):
            d.fuse(torch.randn(1, 3, 2 * d.config.hidden_size))


def test_features_in_another_dtype_are_cast_with_a_warning_naming_both():
    """An fp16 drafter handed float32 features (a user's own capture) warns naming both dtypes and
    gives what the same features cast to fp16 give; matching dtypes and autocast stay silent."""
    import warnings
    d = tiny_drafter(seed=0).to(torch.float16)
    ids, feats = tiny_features(d, B=1, T=3, seed=1)
    with pytest.warns(dr.FeatureDtypeWarning, match=r"float32 but this drafter's weights are float16"):
        got, _ = d(ids, feats.float())
    with warnings.catch_warnings():
        warnings.simplefilter("error", dr.FeatureDtypeWarning)
        want, _ = d(ids, feats.half())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            d.float()(ids, feats.half())
    torch.testing.assert_close(got, want)


# -- vocabulary mapping ---------------------------------------------------------------------------
def test_draft_to_target_uses_offsets():
    """draft_to_target(i) == i + d2t[i], i.e. the sorted selected target ids marked in t2d."""
    d = tiny_drafter(seed=2)
    Vd = d.config.draft_vocab_size
    selected = d.t2d.nonzero().flatten()
    assert not torch.equal(selected, torch.arange(Vd)), "need a non-identity map for this test"
    torch.testing.assert_close(d.draft_to_target(torch.arange(Vd)), selected)
    ids = torch.tensor([[0, Vd - 1, 5], [7, 7, 1]])
    torch.testing.assert_close(d.draft_to_target(ids), ids + d.d2t[ids])


def test_target_logits_scatter_and_neg_inf_elsewhere():
    """target_logits puts draft logit i in target column i + d2t[i] and -inf in every column
    outside the draft vocabulary; its argmax is the mapped draft argmax."""
    d = tiny_drafter(seed=2)
    lo = torch.randn(2, 3, d.config.draft_vocab_size)
    out = d.target_logits(lo)
    cols = torch.arange(d.config.draft_vocab_size) + d.d2t
    assert out.shape == (2, 3, d.config.vocab_size)
    torch.testing.assert_close(out[..., cols], lo)
    rest = torch.ones(d.config.vocab_size, dtype=torch.bool)
    rest[cols] = False
    assert torch.isneginf(out[..., rest]).all()
    torch.testing.assert_close(out.argmax(-1), d.draft_to_target(lo.argmax(-1)))


# -- RoPE -----------------------------------------------------------------------------------------
def _hf_inv_freq(rope_parameters):
    c = tf.LlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=512, rope_parameters=dict(rope_parameters, rope_theta=10000.0))
    return ROPE_INIT_FUNCTIONS[rope_parameters["rope_type"]](c)[0]


@pytest.mark.parametrize("scaling", [
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 64},
    {"rope_type": "linear", "factor": 4.0},
])
def test_rope_scaling_changes_inv_freq_as_hf_does(scaling):
    """Scaled RoPE gives inv_freq different from the default, and equal to transformers' own
    initialiser for that rope type."""
    default = dr.rope_inv_freq(tiny_drafter_config())
    scaled = dr.rope_inv_freq(tiny_drafter_config(rope_scaling=scaling))
    assert not torch.allclose(default, scaled)
    torch.testing.assert_close(default, 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8))
    torch.testing.assert_close(scaled, _hf_inv_freq(scaling).float())


def test_unknown_rope_type_raises_config_error():
    """An unsupported rope_scaling type is a ConfigError naming the type, not a silent default."""
    with pytest.raises(ConfigError, match="no_such_rope"):
        dr.Eagle3Drafter(tiny_drafter_config(rope_scaling={"rope_type": "no_such_rope", "factor": 2.0}))


def test_fed_back_state_is_an_explicit_option():
    """With norm_output the default feedback ('serving', SGLang/vLLM) returns the post-norm state,
    'pre-norm' (SpecForge training) the pre-norm one; step-1 logits are the same either way, the
    next step's differ. Without norm_output both options feed back the pre-norm state."""
    from eagle_nb.model.drafter import FEEDBACK_PRENORM
    d = tiny_drafter(seed=21, norm_output=True)
    ids, feats = tiny_features(d, B=1, T=5, seed=22)
    with torch.no_grad():
        l1, g_serve = d(ids, feats)
        d.set_feedback(FEEDBACK_PRENORM)
        l1b, g_pre = d(ids, feats)
        assert torch.equal(l1, l1b)
        assert torch.allclose(g_serve, d.norm(g_pre))
        assert (d.step(ids, g_serve)[0] - d.step(ids, g_pre)[0]).abs().max() > 1e-2
    plain = tiny_drafter(seed=21)
    with torch.no_grad():
        a = plain(ids, feats)[1]
        plain.set_feedback(FEEDBACK_PRENORM)
        assert torch.equal(a, plain(ids, feats)[1])
    with pytest.raises(ValueError, match="feedback must be one of"):
        d.set_feedback("post")
