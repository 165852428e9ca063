"""Tensors derived from a module's weights (fused projection weights, RoPE tables), cached on the
module in one dict so that a `variant` of the drafter starts with none. Knows nothing else.
"""
from __future__ import annotations

import torch
from torch import nn


def derived(owner: nn.Module) -> dict:
    """The module's cache of tensors derived from its weights (RoPE tables, fused weights), the only
    place such caches live, so `variant` starts one empty."""
    return owner.__dict__.setdefault("_derived", {})


def fused_weight(owner: nn.Module, linears) -> torch.Tensor:
    """The row-concatenation of several Linear weights, so one matmul replaces several (small
    models are overhead-bound). Cached under no_grad and rebuilt when any weight changes."""
    if torch.is_grad_enabled():
        return torch.cat([m.weight for m in linears])
    key = tuple((id(m.weight), m.weight._version, m.weight.device, m.weight.dtype) for m in linears)
    cache = derived(owner)
    cached = cache.get("fused")
    if cached is None or cached[0] != key:
        cached = cache["fused"] = (key, torch.cat([m.weight for m in linears]))
    return cached[1]
