"""Torch modules that stand in for a broken engine part: the decoder layer whose output norm drops
the residual, and an fc computed in float16. fault_fns.py builds drafter variants with them
(`drafter.variant(midlayer=...)`, `variant(fc=...)`); they share every weight of what they wrap.
"""
from __future__ import annotations

from torch import nn


class NoResidualLayer(nn.Module):
    """The decoder layer with its input residual missing from the output (an output norm that
    returns `hidden` instead of `hidden + residual`)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, e, g, *args, **kwargs):
        residual = self.layer.hidden_norm(g) if self.layer.norm_before_residual else g
        return self.layer(e, g, *args, **kwargs) - residual


class HalfLinear(nn.Module):
    """fc computed in float16 (inputs and weight cast), as an fp16 engine does: |x| > 65504
    becomes inf."""

    def __init__(self, fc: nn.Linear):
        super().__init__()
        self.inner = fc

    @property
    def weight(self):
        return self.inner.weight

    def forward(self, x):
        return nn.functional.linear(x.half(), self.inner.weight.half()).to(x.dtype)

