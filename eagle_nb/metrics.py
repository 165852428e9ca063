"""Acceptance metrics from one speculation trace, each defined as the engine or paper defines it
(reference/eagle3.md §5, reference/anchors.md §1.3).

Input: the per-verify-step accepted counts (0..k) of a chain of depth k, or of a tree of depth
(num_steps) k verifying `num_draft_tokens` nodes (root included; tree.py), pooled over requests as
the engines pool them. For trees, SGLang's rates use num_draft_tokens (old: accept_len / N; new:
accepted / (N - 1) proposed drafts per verify, the root slot excluded); vLLM's per-position rates
count accepted path depth; "drafted" counts the N - 1 tree nodes; conditional_alpha (EAGLE's n-alpha,
defined on chains) becomes P(some depth-i node accepted | depth i-1 reached). Knows nothing about models.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class AcceptanceMetrics:
    depth: int
    verify_steps: int
    accepted: int
    drafted: int
    accept_length: float                      # tau = 1 + accepted / verify steps (bonus included)
    per_position_acceptance: list[float]      # vLLM: accepted at position i / drafts (unconditional)
    draft_acceptance_rate: float              # vLLM "Avg Draft acceptance rate": accepted / drafted
    conditional_alpha: list[float | None]     # EAGLE n-alpha: P(accept i | 0..i-1 accepted)
    accept_histogram: list[float]             # gpt-fast "Acceptance probs": P(accepted == m), m=0..k
    accept_counts: list[int]                  # raw histogram counts
    mean_accepted: float                      # gpt-fast "Mean Accepted" (tau - 1)
    sglang_accept_len: float                  # (accepted + bs) / forward_ct, bs = 1 per request
    sglang_accept_rate_by_draft_tokens: float  # PR #13212..#23530: accept_len / num_draft_tokens
    sglang_accept_rate_by_drafts: float       # after PR #23530: accepted drafts / proposed drafts
    num_draft_tokens: int | None = None       # nodes verified per step, root included (chain: k + 1)

    def as_dict(self) -> dict:
        return asdict(self)


FORMULAS = {
    "accept_length": "1 + accepted / verify_steps (bonus token included; EAGLE tau, vLLM mean acceptance length)",
    "per_position_acceptance": "vLLM: #cycles accepting position i / #cycles (unconditional)",
    "draft_acceptance_rate": "vLLM: accepted / drafted",
    "conditional_alpha": "EAGLE n-alpha: #cycles accepting i / #cycles accepting 0..i-1",
    "accept_histogram": "gpt-fast: fraction of cycles accepting exactly m drafts",
    "sglang_accept_rate_by_draft_tokens": "SGLang PR #13212 to #23530: accept_len / num_draft_tokens "
                                          "(num_draft_tokens = k + 1 for a chain)",
    "sglang_accept_rate_by_drafts": "SGLang after PR #23530: accepted drafts / proposed drafts",
}


def acceptance_metrics(accept_counts: list[int], depth: int,
                       num_draft_tokens: int | None = None) -> AcceptanceMetrics:
    n = len(accept_counts)
    N = depth + 1 if num_draft_tokens is None else num_draft_tokens   # verified nodes incl. root
    if n == 0:
        raise ValueError("no verify steps: nothing to measure")
    bad = [a for a in accept_counts if not 0 <= a <= depth]
    if bad:
        raise ValueError(f"accepted counts {bad[:5]} outside 0..{depth}")
    accepted = sum(accept_counts)
    reach = [sum(a > i for a in accept_counts) for i in range(depth)]       # accepted position i
    tried = [sum(a >= i for a in accept_counts) for i in range(depth)]      # 0..i-1 all accepted
    hist = [sum(a == m for a in accept_counts) for m in range(depth + 1)]
    tau = 1 + accepted / n
    return AcceptanceMetrics(
        depth=depth, verify_steps=n, accepted=accepted, drafted=n * (N - 1), accept_length=tau,
        per_position_acceptance=[r / n for r in reach],
        draft_acceptance_rate=accepted / (n * (N - 1)),
        conditional_alpha=[(r / t if t else None) for r, t in zip(reach, tried)],
        accept_histogram=[h / n for h in hist], accept_counts=hist, mean_accepted=tau - 1,
        sglang_accept_len=tau, sglang_accept_rate_by_draft_tokens=tau / N,
        sglang_accept_rate_by_drafts=accepted / (n * (N - 1)), num_draft_tokens=N)


def from_stats(stats_list) -> AcceptanceMetrics:
    """Pool several SpecStats of the same depth and tree width, as the engines pool requests."""
    depths = {s.depth for s in stats_list}
    if len(depths) != 1:
        raise ValueError(f"cannot pool traces of different depths {sorted(depths)}")
    depth = depths.pop()
    widths = {getattr(s, "num_draft_tokens", None) or depth + 1 for s in stats_list}
    if len(widths) != 1:
        raise ValueError(f"cannot pool traces of different num_draft_tokens {sorted(widths)}")
    return acceptance_metrics([a for s in stats_list for a in s.accept_counts], depth, widths.pop())


def sglang_log_line(m: AcceptanceMetrics, formula: str = "by_draft_tokens") -> str:
    """The decode log line SGLang prints, under the chosen accept-rate formula."""
    rate = m.sglang_accept_rate_by_draft_tokens if formula == "by_draft_tokens" \
        else m.sglang_accept_rate_by_drafts
    return f"accept len: {m.sglang_accept_len:.2f}, accept rate: {rate:.2f}"


def vllm_log_line(m: AcceptanceMetrics) -> str:
    per = ", ".join(f"{r:.3f}" for r in m.per_position_acceptance)
    return (f"SpecDecoding metrics: Mean acceptance length: {m.accept_length:.2f}, "
            f"Accepted: {m.accepted} tokens, Drafted: {m.drafted} tokens, "
            f"Per-position acceptance rate: {per}, "
            f"Avg Draft acceptance rate: {100 * m.draft_acceptance_rate:.1f}%")
