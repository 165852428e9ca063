"""The draft tree's shape: SGLang's rules for (num_steps, topk, num_draft_tokens), the tree as
parent pointers, and its attention mask. Pure data; no model. torch is imported by the masks only,
so that `Setting` checks a tree shape before torch loads (the CLI's flags).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

TREE_ATTN = ("sdpa", "eager")


class TreeUnsupported(ValueError):
    """The target cannot verify a tree (attention or cache kind); the message says which."""


@dataclass
class DraftTree:
    tokens: list[int]             # (N,) node 0 = root (last verified token), then drafted target ids
    parents: list[int]            # (N,) parent node per node, -1 for the root
    depths: list[int]             # (N,) 0 for the root
    scores: list[float]           # (N,) cumulative draft log-prob, 0 for the root

    @property
    def is_chain(self) -> bool:
        return self.parents == list(range(-1, len(self.parents) - 1))

    def ancestor_mask(self) -> torch.Tensor:
        """(N, N) bool: node i may attend to node j iff j is i or an ancestor of i."""
        import torch
        n = len(self.tokens)
        m = torch.eye(n, dtype=torch.bool)
        for i in range(1, n):
            m[i] |= m[self.parents[i]]
        return m


def candidate_count(num_steps: int, topk: int) -> int:
    return topk + (num_steps - 1) * topk * topk


def resolve_num_draft_tokens(num_steps: int, topk: int, num_draft_tokens: int | None) -> int:
    """SGLang's rules: topk = 1 forces num_draft_tokens = num_steps + 1; otherwise 2..1 + all
    candidates (default: every candidate, no pruning)."""
    if num_steps < 1 or topk < 1:
        raise ValueError(f"num_steps and topk must be >= 1, got {num_steps}, {topk}")
    most = 1 + candidate_count(num_steps, topk)
    if topk == 1 or num_draft_tokens is None:
        return most
    if not 2 <= num_draft_tokens <= most:
        raise ValueError(f"num_draft_tokens {num_draft_tokens} outside 2..{most} (= 1 + topk + "
                         f"(num_steps-1)*topk^2 for num_steps {num_steps}, topk {topk})")
    return num_draft_tokens


def tree_mask_4d(tree: DraftTree, n: int, dtype, device) -> torch.Tensor:
    """(1, 1, N, n+N) additive mask: 0 where a node may attend (prefix, ancestors, self)."""
    import torch
    allowed = torch.cat([torch.ones(len(tree.tokens), n, dtype=torch.bool),
                         tree.ancestor_mask()], 1).to(device)
    return torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(
        ~allowed, torch.finfo(dtype).min)[None, None]
