"""The torch module behind the `vocabulary-coverage` condition: a drafter's lm_head whose draft ids
from `keep` on can never be proposed (their logits are -inf), as if the draft vocabulary had been
built with `keep` ids. It shares the head's weight (condition_fns.py hands it to
`drafter.variant(lm_head=...)`); nothing else of the drafter changes.
"""
from __future__ import annotations

import torch
from torch import nn


class MaskedHead(nn.Module):
    """`head` with its output columns `keep:` set to -inf."""

    def __init__(self, head: nn.Linear, keep: int):
        super().__init__()
        if not 0 < keep < head.out_features:
            raise ValueError(f"keep must be in 1..{head.out_features - 1}, got {keep}")
        self.inner, self.keep = head, keep

    @property
    def weight(self):
        return self.inner.weight

    @property
    def in_features(self) -> int:
        return self.inner.in_features

    @property
    def out_features(self) -> int:
        return self.inner.out_features

    def forward(self, x):
        y = self.inner(x)
        return torch.cat([y[..., :self.keep], torch.full_like(y[..., self.keep:], float("-inf"))], -1)
