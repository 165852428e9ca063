"""The verify rules the engines implement at T > 0, as pure functions of draft tokens and
probability tensors (docs/metrics.md, "Verify rules"; docs/conditions.md).

A rule is two choices: how a draft token is picked from the drafter's distribution q, and how the
target's distribution p accepts it.

| rule      | draft            | accept draft x at position i                 | on the first rejection        |
|-----------|------------------|----------------------------------------------|-------------------------------|
| `argmax`  | argmax of q      | w.p. p_i(x) (q treated as one-hot at x)      | normalise(p_i with x zeroed)  |
| `sampled` | x ~ q_i          | w.p. min(1, p_i(x) / q_i(x))                 | normalise(max(p_i - q_i, 0))  |
| `strict`  | x ~ q_i          | iff x == y_i, y_i ~ p_i drawn independently   | y_i                           |

`argmax` is vLLM's `draft_sample_method="greedy"` (its default), `sampled` is vLLM's
`"probabilistic"`, SGLang's after PR #26312 and the papers (Leviathan et al., Chen et al.),
`strict` is exact matching against the target's own sample (vLLM Model Runner V2 before PR #40651,
llama.cpp's exact match). All three emit the target's distribution; they differ only in how
often a draft is accepted: p_i(argmax q), sum_x min(p_i, q_i) and sum_x p_i q_i
(`acceptance_probability`). NOTE: exact matching of an *argmax* draft (llama.cpp drafts its top
candidate) accepts w.p. p_i(x) and replaces with normalise(p_i with x zeroed): the `argmax` rule
in distribution. At T = 0 every rule is greedy verification (`accept_greedy`).

Knows nothing about models, tokenizers or the loop; every function takes tensors and a generator.
"""
from __future__ import annotations

import torch

from eagle_nb.model.config import (  # noqa: F401 - the rules' names live with the plain names
    ARGMAX,
    DEFAULT_RULE,
    ENGINE_NAMES,
    SAMPLED,
    STRICT,
    VERIFY_RULES,
    check_rule,
)


def drafts_argmax(rule: str) -> bool:
    """Whether the rule drafts the drafter's argmax (at any temperature) instead of a sample."""
    return check_rule(rule) == ARGMAX


def needs_draft_probs(rule: str) -> bool:
    """Whether verification reads the drafter's full distribution q (only `sampled` does)."""
    return check_rule(rule) == SAMPLED


# -- the rules: pure functions ------------------------------------------------------------------------
def accept_greedy(draft_tokens: torch.Tensor, target_tokens: torch.Tensor) -> int:
    """T = 0, every rule: number of leading drafts equal to the target's argmax. draft (k,),
    target (k+1,)."""
    k = draft_tokens.numel()
    match = (draft_tokens == target_tokens[:k]).int()
    return int(match.cumprod(0).sum())


def accept_sample(draft_tokens: torch.Tensor, q: torch.Tensor, p: torch.Tensor,
                  generator: torch.Generator) -> tuple[int, int]:
    """`sampled`: rejection sampling. draft_tokens (k,) sampled from q (k, V); p (k+1, V) target
    probs. Accept draft i w.p. min(1, p_i(x)/q_i(x)); at the first rejection resample from
    normalise(max(p_i - q_i, 0)); after k acceptances sample the bonus from p_k.
    Returns (accepted count, the extra token)."""
    k = draft_tokens.numel()
    for i in range(k):
        x = int(draft_tokens[i])
        r = torch.rand((), generator=generator, device=p.device)
        if r * q[i, x] < p[i, x]:           # r < p/q without dividing by zero
            continue
        resid = (p[i] - q[i]).clamp(min=0)
        total = resid.sum()
        resid = p[i] if total <= 0 else resid / total
        return i, int(torch.multinomial(resid, 1, generator=generator))
    return k, int(torch.multinomial(p[k], 1, generator=generator))


def accept_one_hot(draft_tokens: torch.Tensor, p: torch.Tensor,
                   generator: torch.Generator) -> tuple[int, int]:
    """`argmax`: rejection sampling against one-hot draft probabilities (vLLM's
    rejection_random_sample_kernel with no draft probs). Accept draft i w.p. p_i(x); at the first
    rejection resample from p_i with x zeroed, normalised. Returns (accepted count, extra token)."""
    k = draft_tokens.numel()
    for i in range(k):
        x = int(draft_tokens[i])
        r = torch.rand((), generator=generator, device=p.device)
        if r < p[i, x]:
            continue
        resid = p[i].clone()
        resid[x] = 0
        total = resid.sum()
        resid = p[i] if total <= 0 else resid / total
        return i, int(torch.multinomial(resid, 1, generator=generator))
    return k, int(torch.multinomial(p[k], 1, generator=generator))


def accept_strict(draft_tokens: torch.Tensor, p: torch.Tensor,
                  generator: torch.Generator) -> tuple[int, int]:
    """`strict`: at each position the target samples y_i ~ p_i; draft i is accepted iff it equals
    y_i, and the first y_i that differs is the extra token (after k acceptances: y_k ~ p_k)."""
    k = draft_tokens.numel()
    for i in range(k):
        y = int(torch.multinomial(p[i], 1, generator=generator))
        if y != int(draft_tokens[i]):
            return i, y
    return k, int(torch.multinomial(p[k], 1, generator=generator))


def accept(rule: str, draft_tokens: torch.Tensor, q: torch.Tensor | None, p: torch.Tensor,
           generator: torch.Generator) -> tuple[int, int]:
    """Verify k drafts at T > 0 under `rule`. draft_tokens (k,); q (k, V) the drafter's
    probabilities in target-vocab ids (read by `sampled` only; None otherwise); p (k+1, V)."""
    check_rule(rule)
    if rule == SAMPLED:
        if q is None:
            raise ValueError("the 'sampled' rule needs the drafter's probabilities q")
        return accept_sample(draft_tokens, q, p, generator)
    if rule == ARGMAX:
        return accept_one_hot(draft_tokens, p, generator)
    return accept_strict(draft_tokens, p, generator)


def acceptance_probability(rule: str, q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Probability that one draft is accepted, per row: q, p (..., V) the drafter's and target's
    distributions at the same position. argmax: p(argmax q); sampled: sum min(p, q); strict:
    sum p q. (Row-wise; position i's conditional acceptance when 0..i-1 were accepted.)"""
    check_rule(rule)
    if rule == ARGMAX:
        return p.gather(-1, q.argmax(-1, keepdim=True))[..., 0]
    if rule == SAMPLED:
        return torch.minimum(p, q).sum(-1)
    return (p * q).sum(-1)
