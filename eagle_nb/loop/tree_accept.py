"""Tree acceptance rules, pure functions of tokens, parents and target outputs: greedy (longest
matching root-to-leaf path) and rejection sampling along the tree (SpecInfer / EAGLE-2).
"""

from __future__ import annotations

import torch


# -- acceptance along the tree: pure functions --------------------------------------------------------
def children_of(parents) -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for j, p in enumerate(parents):
        if p >= 0:
            kids.setdefault(p, []).append(j)
    return kids


def accept_tree_greedy(tokens, parents, target_tokens) -> list[int]:
    """Accepted path (node ids, root excluded) of a greedy tree verify: from the root, follow the
    first child whose token equals the target's token at the current node. tokens, parents,
    target_tokens (N,). The bonus token is target_tokens[path[-1]] (target_tokens[0] if empty)."""
    kids, node, path = children_of(parents), 0, []
    while True:
        t = int(target_tokens[node])
        nxt = next((c for c in kids.get(node, ()) if int(tokens[c]) == t), None)
        if nxt is None:
            return path
        path.append(nxt)
        node = nxt


def accept_tree_sample(tokens, parents, p: torch.Tensor, generator: torch.Generator):
    """Recursive rejection sampling over a tree of point-mass drafts. p (N, V): the target's
    probabilities at every node. At each node its children are tried in order: child x is accepted
    with probability r(x)/Σr, r = p[node] with every rejected child's token zeroed; if none is
    accepted the token is drawn from normalise(r); at a leaf from p[leaf]. Returns (path, token)."""
    kids, node, path = children_of(parents), 0, []
    while True:
        r = p[node].clone()
        for c in kids.get(node, ()):
            x, total = int(tokens[c]), r.sum()
            u = torch.rand((), generator=generator, device=p.device, dtype=p.dtype)
            if u * total < r[x]:
                path.append(c)
                node = c
                break
            r[x] = 0
        else:
            return path, int(torch.multinomial(r / r.sum(), 1, generator=generator))
