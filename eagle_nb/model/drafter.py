"""The EAGLE-3 draft model (arXiv 2503.01840), written top-down with checkpoint weight names.

One decoder layer (`midlayer`) whose q/k/v read 2H = [input_layernorm(embed), hidden_norm(g)],
embedding first, residual on g; `fc` fuses the n_aux target layers (n_aux*Ht -> H, no bias);
logits are `lm_head(norm(out))` over the draft vocabulary, mapped to target ids with i + d2t[i].
Facts: docs/drafter.md

Two explicit input modes, never a width test: `fuse()` for target features (always applies fc and
fails loudly on the wrong width), then `step()` on an H-wide state; later draft steps call `step()`
with the drafter's own state. The engines' silent width check exists only as a named fault, passed
explicitly: `fuse(x, fc_policy="engine-width-check")`. The d2t table in use can be passed the same
way (`draft_to_target(ids, d2t)`); the module itself is never mutated for a fault: a fault gets a
`variant()`, sharing every weight. Knows nothing about checkpoint formats or the speculation loop.
"""
from __future__ import annotations

import copy
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from eagle_nb.model.attention import Attention
from eagle_nb.model.config import (FC_ENGINE_WIDTH_CHECK, FC_POLICIES, FC_STRICT, ConfigError,
                                   DrafterConfig)
from eagle_nb.model.derived import derived, fused_weight
from eagle_nb.model.kv_cache import KVCache


# The state fed back to the next draft step (docs/drafter.md). With norm_output
# unset both give the pre-norm layer output; they differ only for norm_output=True drafts.
FEEDBACK_SERVING = "serving"    # SGLang >= 0.5.12, vLLM: post-norm state when norm_output, else pre-norm
FEEDBACK_PRENORM = "pre-norm"   # SpecForge training (whatever norm_output says), EAGLE, SGLang <= 0.5.11
FEEDBACKS = (FEEDBACK_SERVING, FEEDBACK_PRENORM)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        if x.dtype == torch.float32 and self.weight.dtype == torch.float32:
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)   # one fused op
        x32 = x.float()                  # half precision: normalise in fp32, as HF Llama does
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def variant(module: nn.Module, **attrs) -> nn.Module:
    """A shallow copy of `module` sharing every weight, with its own submodule / parameter / buffer
    tables and an empty `derived` cache; `attrs` (submodules, buffers, plain attributes) are set on
    the copy only, so the original is never touched. How a named fault changes a drafter."""
    v = copy.copy(module)
    v._modules, v._parameters, v._buffers = dict(module._modules), dict(module._parameters), \
        dict(module._buffers)
    v.__dict__["_derived"] = {}
    for k, val in attrs.items():
        setattr(v, k, val)
    return v


def rope_inv_freq(cfg: DrafterConfig) -> torch.Tensor:
    """RoPE inverse frequencies from the *draft* config (default, linear or llama3 scaling)."""
    d = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    s = cfg.rope_scaling or {}
    kind = s.get("rope_type", s.get("type", "default"))
    if kind == "default":
        pass
    elif kind == "linear":
        inv = inv / s["factor"]
    elif kind == "llama3":
        factor, lo, hi = s["factor"], s.get("low_freq_factor", 1.0), s.get("high_freq_factor", 4.0)
        old = s.get("original_max_position_embeddings", 8192)
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - lo) / (hi - lo)
        scaled = torch.where(wavelen > old / lo, inv / factor, inv)
        mid = (wavelen <= old / lo) & (wavelen >= old / hi)
        inv = torch.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    else:
        raise ConfigError(f"rope_scaling type {kind!r} is not supported by the eagle_nb drafter")
    return inv.float()


class MLP(nn.Module):
    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        gate, up = F.linear(x, fused_weight(self, (self.gate_proj, self.up_proj))).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class Eagle3DecoderLayer(nn.Module):
    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        H, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.input_layernorm = RMSNorm(H, eps)           # on the token embedding
        self.hidden_norm = RMSNorm(H, eps)               # on the fused / recurrent state g
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(H, eps)
        self.mlp = MLP(cfg)
        self.norm_before_residual = cfg.norm_before_residual

    def forward(self, e, g, cos, sin, cache, start, mask=None):
        # e: (B, T, H) token embeddings; g: (B, T, H) fused target state or previous draft state
        gn = self.hidden_norm(g)
        residual = gn if self.norm_before_residual else g
        x = torch.cat([self.input_layernorm(e), gn], dim=-1)           # (B, T, 2H), embed first
        h = residual + self.self_attn(x, cos, sin, cache, start, mask)
        return h + self.mlp(self.post_attention_layernorm(h))          # (B, T, H), pre-norm


class FeatureDtypeWarning(UserWarning):
    """Target features handed to a drafter in another dtype than its weights (float32 states from
    a user's capture into an fp16 drafter): cast to the weights' dtype at the drafter's input."""


class Eagle3Drafter(nn.Module):
    def __init__(self, cfg: DrafterConfig, feedback: str = FEEDBACK_SERVING):
        super().__init__()
        self.config = cfg
        self.set_feedback(feedback)
        H, Ht = cfg.hidden_size, cfg.target_hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, H)
        if cfg.norm_before_fc:
            self.input_norm = RMSNorm(cfg.fc_in_features, cfg.rms_norm_eps)
        if cfg.fc_norm:
            self.fc_norm = nn.ModuleList(RMSNorm(Ht, cfg.rms_norm_eps) for _ in range(cfg.num_aux))
        self.fc = nn.Linear(cfg.fc_in_features, H, bias=False)
        self.midlayer = Eagle3DecoderLayer(cfg)
        self.norm = RMSNorm(H, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(H, cfg.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(cfg.vocab_size, dtype=torch.bool)
                             if cfg.draft_vocab_size == cfg.vocab_size
                             else torch.zeros(cfg.vocab_size, dtype=torch.bool))
        self.register_buffer("inv_freq", rope_inv_freq(cfg), persistent=False)

    # -- the two input modes -------------------------------------------------------------------
    def fuse(self, target_features: torch.Tensor, fc_policy: str = FC_STRICT) -> torch.Tensor:
        """Target features (B, T, n_aux*Ht), layers in ascending order -> fused state (B, T, H).
        `fc_policy` is strict unless a named fault asks for the engines' width check."""
        if fc_policy not in FC_POLICIES:
            raise ValueError(f"unknown fc_policy {fc_policy!r}; known: {FC_POLICIES}")
        width, want = target_features.shape[-1], self.config.fc_in_features
        if fc_policy == FC_ENGINE_WIDTH_CHECK and width == self.config.hidden_size:
            return self._weight_dtype(target_features)   # ABLATION: the engines' silent skip of fc
        if width != want:
            raise ValueError(
                f"target features are {width} wide but this drafter's fc expects {want} "
                f"(= {self.config.num_aux} aux layers x {self.config.target_hidden_size}); "
                f"the target's auxiliary hidden states were not captured/concatenated")
        x = self._weight_dtype(target_features)
        if self.config.fc_norm:
            chunks = x.split(self.config.target_hidden_size, dim=-1)
            x = torch.cat([n(c) for n, c in zip(self.fc_norm, chunks)], dim=-1)
        if self.config.norm_before_fc:
            x = self.input_norm(x)
        return self.fc(x)

    def _weight_dtype(self, x: torch.Tensor) -> torch.Tensor:
        """`x` in the weights' dtype, with a FeatureDtypeWarning naming both when it was not (under
        autocast the matmuls choose their own dtype and nothing is cast)."""
        want = self.fc.weight.dtype
        if x.dtype == want or torch.is_autocast_enabled(x.device.type):
            return x
        warnings.warn(f"target features are {str(x.dtype).removeprefix('torch.')} but this drafter's "
                      f"weights are {str(want).removeprefix('torch.')}: cast to "
                      f"{str(want).removeprefix('torch.')} at the drafter's input (capture in that dtype, "
                      f"or load the drafter with dtype={x.dtype})", FeatureDtypeWarning, stacklevel=3)
        return x.to(want)

    def step(self, input_ids, g, cache: KVCache | None = None, start: int = 0,
             positions: torch.Tensor | None = None, mask: torch.Tensor | None = None):
        """One draft-layer pass. input_ids (B, T) are the tokens t+1 paired with states g (B, T, H)
        of tokens t, written at cache slots start..start+T-1. Chain: slot == RoPE position, causal.
        Tree drafts (loop/tree.py) pass RoPE `positions` (T,) and a bool `mask` (T, start+T), True =
        attend. Returns (draft logits (B, T, Vd), next state)."""
        T = input_ids.shape[1]
        if positions is None:
            cos, sin = self._rope(start + T, g)
            cos, sin = cos[start:start + T], sin[start:start + T]       # (T, hd)
        else:
            cos, sin = self._rope(int(positions.max()) + 1, g)
            cos, sin = cos[positions], sin[positions]                    # (T, hd)
        e = self.embed_tokens(input_ids)                                 # (B, T, H)
        h = self.midlayer(e, g, cos, sin, cache, start, mask)            # (B, T, H) pre-norm
        hn = self.norm(h)
        logits = self.lm_head(hn)                                        # (B, T, Vd)
        return logits, (hn if self.feeds_back_post_norm else h)

    def set_feedback(self, feedback: str) -> None:
        """Choose the fed-back state: FEEDBACK_SERVING (default, what the engines serve) or
        FEEDBACK_PRENORM (what SpecForge trains norm_output drafts with)."""
        if feedback not in FEEDBACKS:
            raise ValueError(f"feedback must be one of {FEEDBACKS}, got {feedback!r}")
        self.feedback = feedback

    @property
    def feeds_back_post_norm(self) -> bool:
        return bool(self.config.norm_output) and self.feedback == FEEDBACK_SERVING

    def _rope(self, n: int, like: torch.Tensor):
        """cos/sin tables for positions 0..n-1, grown on demand and kept (no per-step rebuild)."""
        cache = derived(self)
        tab = cache.get("rope")
        if (tab is None or tab[2] is not self.inv_freq or tab[0].shape[0] < n
                or tab[0].dtype != like.dtype or tab[0].device != like.device):
            m = max(n, 2 * (tab[0].shape[0] if tab is not None else 256))
            freqs = torch.arange(m, device=like.device, dtype=torch.float32)[:, None] * \
                self.inv_freq.to(like.device)[None, :]                  # (m, hd/2)
            emb = torch.cat([freqs, freqs], dim=-1)
            tab = cache["rope"] = (emb.cos().to(like.dtype), emb.sin().to(like.dtype), self.inv_freq)
        return tab[0], tab[1]

    def variant(self, **attrs) -> "Eagle3Drafter":
        """This drafter sharing every weight, with fresh caches and `attrs` (fc, midlayer, inv_freq,
        config, ...) replaced on the copy only."""
        return variant(self, **attrs)

    def forward(self, input_ids, target_features):
        """First draft step over all positions, causal, no cache: (draft logits, next state)."""
        return self.step(input_ids, self.fuse(target_features))

    # -- vocabulary mapping --------------------------------------------------------------------
    # `d2t` defaults to this drafter's own table; a named fault passes the table it uses instead.
    def draft_to_target(self, draft_ids: torch.Tensor, d2t: torch.Tensor | None = None) -> torch.Tensor:
        d2t = self.d2t if d2t is None else d2t
        return draft_ids + d2t[draft_ids]

    def target_logits(self, draft_logits: torch.Tensor, d2t: torch.Tensor | None = None) -> torch.Tensor:
        """Scatter draft logits (.., Vd) into the target vocabulary (.., V), -inf elsewhere (vLLM)."""
        d2t = self.d2t if d2t is None else d2t
        out = draft_logits.new_full((*draft_logits.shape[:-1], self.config.vocab_size), float("-inf"))
        idx = torch.arange(self.config.draft_vocab_size, device=draft_logits.device) + d2t
        out[..., idx] = draft_logits
        return out

    def new_cache(self, batch_size: int, max_len: int) -> KVCache:
        c = self.config
        p = self.fc.weight
        return KVCache(1, batch_size, max_len, c.num_key_value_heads, c.head_dim, p.device, p.dtype)
