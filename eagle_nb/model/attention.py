"""The drafter's attention: q/k/v read the 2H-wide [embed, hidden] input, RoPE, grouped-query
attention over a `KVCache`, an explicit mask for key layouts that are not one sequence
(training-time test, trees) or a key store that attends by itself (the training-time test's
`DiagonalKeys`), and the config's sliding window honoured (or refused where it cannot be). Knows
nothing about the rest of the drafter.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.derived import fused_weight
from eagle_nb.model.kv_cache import KVCache


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        H, nh, nkv, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.window = cfg.sliding_window
        self.q_proj = nn.Linear(2 * H, nh * hd, bias=False)   # input is 2H: [embed, hidden]
        self.k_proj = nn.Linear(2 * H, nkv * hd, bias=False)
        self.v_proj = nn.Linear(2 * H, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nh * hd, H, bias=False)

    def forward(self, x, cos, sin, cache: KVCache | None, start: int, mask=None):
        """x (B, T, 2H) at positions start..start+T-1. `cache.update` returns every key the
        queries may see (B, nkv, S, hd); `mask` (T, S) bool overrides the positional causal
        mask, for key layouts that are not one sequence (training-time test, trees)."""
        B, T, _ = x.shape
        nq, nk = self.nh * self.hd, self.nkv * self.hd
        qkv = F.linear(x, fused_weight(self, (self.q_proj, self.k_proj, self.v_proj)))
        q, k, v = qkv.split([nq, nk, nk], dim=-1)
        q = q.view(B, T, self.nh, self.hd).transpose(1, 2)                 # (B, nh, T, hd)
        k = k.view(B, T, self.nkv, self.hd).transpose(1, 2)                # (B, nkv, T, hd)
        v = v.view(B, T, self.nkv, self.hd).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if cache is not None and hasattr(cache, "attend"):        # a key layout with its own attention
            if self.window is not None and start + T > self.window:
                self._window_mask(start, T, T, True, x.device)          # refused, naming the window
            y = cache.attend(q, k, v)                                   # (B, nh, T, hd)
            return self.o_proj(y.transpose(1, 2).reshape(B, T, self.nh * self.hd))
        if cache is not None:
            k, v = cache.update(0, start, k, v)                             # (B, nkv, start+T, hd)
        S = k.shape[2]
        if mask is not None:
            if tuple(mask.shape) != (T, S):
                raise ValueError(f"attention mask is {tuple(mask.shape)}, expected (T, S) = {(T, S)}")
            causal = False
        elif T == 1:
            mask, causal = None, False          # one query attends to every cached key
        elif S == T:
            mask, causal = None, True
        else:                                   # extend after a cached prefix
            qpos = torch.arange(start, start + T, device=x.device)
            mask, causal = torch.arange(S, device=x.device)[None, :] <= qpos[:, None], False
        if self.window is not None and start + T > self.window:
            mask, causal = self._window_mask(start, T, S, mask, x.device), False
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                           enable_gqa=self.nkv != self.nh)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.nh * self.hd))

    def _window_mask(self, start: int, T: int, S: int, mask, device):
        """(T, S) causal mask limited to the last `window` positions of each query (the keys are
        positions start+T-S .. start+T-1). Key layouts that are not one sequence (trees, the
        training-time test) cannot be windowed here: refused rather than attended past it."""
        if mask is not None:
            raise ValueError(f"this drafter's config sets sliding_window {self.window} and the "
                             f"sequence reaches position {start + T - 1}: tree and training-time "
                             f"layouts are not windowed by eagle_nb; keep prompt + draft within "
                             f"{self.window} tokens")
        qpos = torch.arange(start, start + T, device=device)[:, None]
        kpos = torch.arange(start + T - S, start + T, device=device)[None, :]
        return (kpos <= qpos) & (qpos - kpos < self.window)
