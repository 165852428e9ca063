"""Acceptance metrics from one speculation trace, each defined as the engine or paper defines it
(reference/eagle3.md §5, reference/anchors.md §1.3).

Input: the per-verify-step accepted counts (0..k) of a chain of depth k, pooled over requests as
the engines pool them. Knows nothing about models.
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
    # SGLang per-request meta_info `spec_accept_length`: completion tokens / verify steps (the token
    # from prefill counted), averaged over requests; None when completion counts were not given.
    sglang_spec_accept_length: float | None = None

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
    "sglang_spec_accept_length": "SGLang per-request meta_info spec_accept_length: completion tokens"
                                 " / verify steps (prefill token included), mean over requests",
}

# The accept rate in SGLang's decode log line, by release (read in the released wheels'
# scheduler metrics code): <= 0.5.10 accept_len / num_draft_tokens; >= 0.5.11 (PR #23530)
# accepted drafts / proposed drafts (bonus token and root slot excluded).
SGLANG_RATE_FORMULAS = {
    "by_drafts": "SGLang >= 0.5.11 (PR #23530): accepted drafts / proposed drafts",
    "by_draft_tokens": "SGLang <= 0.5.10 (PR #13212): accept len / num_draft_tokens",
}


def sglang_spec_accept_length(completion_tokens: int, verify_steps: int) -> float:
    """SGLang's per-request `spec_accept_length` (tokenizer_manager.py, 0.5.14): completion tokens
    over verify steps. The first token comes from prefill, not from a verify, yet is counted, so
    this exceeds tau = 1 + accepted / verify steps by about 1 / verify steps."""
    if verify_steps <= 0:
        raise ValueError(f"verify_steps must be > 0, got {verify_steps}")
    return completion_tokens / verify_steps


def acceptance_metrics(accept_counts: list[int], depth: int,
                       completions: list[tuple[int, int]] | None = None) -> AcceptanceMetrics:
    """`completions`: optional (completion tokens, verify steps) per request, for SGLang's
    per-request spec_accept_length."""
    n = len(accept_counts)
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
        depth=depth, verify_steps=n, accepted=accepted, drafted=n * depth, accept_length=tau,
        per_position_acceptance=[r / n for r in reach],
        draft_acceptance_rate=accepted / (n * depth),
        conditional_alpha=[(r / t if t else None) for r, t in zip(reach, tried)],
        accept_histogram=[h / n for h in hist], accept_counts=hist, mean_accepted=tau - 1,
        sglang_accept_len=tau, sglang_accept_rate_by_draft_tokens=tau / (depth + 1),
        sglang_accept_rate_by_drafts=accepted / (n * depth),
        sglang_spec_accept_length=None if not completions else
        sum(sglang_spec_accept_length(c, v) for c, v in completions) / len(completions))


def from_stats(stats_list) -> AcceptanceMetrics:
    """Pool several SpecStats of the same depth, as the engines pool requests."""
    depths = {s.depth for s in stats_list}
    if len(depths) != 1:
        raise ValueError(f"cannot pool traces of different depths {sorted(depths)}")
    completions = [(len(s.tokens), len(s.steps)) for s in stats_list]
    if not all(c and v for c, v in completions):   # traces without their tokens: not computable
        completions = None
    return acceptance_metrics([a for s in stats_list for a in s.accept_counts], depths.pop(),
                              completions)


def sglang_log_line(m: AcceptanceMetrics, formula: str = "by_drafts", label: bool = False) -> str:
    """The decode log line SGLang prints, under the chosen accept-rate formula: "by_drafts" (the
    current one, SGLang >= 0.5.11) or "by_draft_tokens" (<= 0.5.10). `label` appends which."""
    if formula not in SGLANG_RATE_FORMULAS:
        raise ValueError(f"unknown SGLang accept-rate formula {formula!r}; "
                         f"choose from {sorted(SGLANG_RATE_FORMULAS)}")
    rate = m.sglang_accept_rate_by_draft_tokens if formula == "by_draft_tokens" \
        else m.sglang_accept_rate_by_drafts
    line = f"accept len: {m.sglang_accept_len:.2f}, accept rate: {rate:.2f}"
    return f"{line}  [{SGLANG_RATE_FORMULAS[formula]}]" if label else line


def vllm_log_line(m: AcceptanceMetrics) -> str:
    per = ", ".join(f"{r:.3f}" for r in m.per_position_acceptance)
    return (f"SpecDecoding metrics: Mean acceptance length: {m.accept_length:.2f}, "
            f"Accepted: {m.accepted} tokens, Drafted: {m.drafted} tokens, "
            f"Per-position acceptance rate: {per}, "
            f"Avg Draft acceptance rate: {100 * m.draft_acceptance_rate:.1f}%")
