"""Acceptance metrics from one speculation trace, each defined as the engine or paper defines it
(reference/eagle3.md §5, reference/anchors.md §1.3).

Input: the per-verify-step accepted counts (0..k) of a chain of depth k, pooled over requests as
the engines pool them. `METRICS` is the one table of (name, label, definition, source, format)
that the summary dict, the text report, the DataFrame and the JSON are all built from; engines
that print the same number under another name (SGLang's accept len is tau, its post-#23530 rate is
vLLM's draft acceptance rate, gpt-fast's Mean Accepted is tau - 1) are named in its source column,
not stored twice. Knows nothing about models.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, NamedTuple


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
    sglang_accept_rate_by_draft_tokens: float  # PR #13212..#23530: accept_len / num_draft_tokens

    def as_dict(self) -> dict:
        return asdict(self)


def _list(xs, nd: int = 3) -> str:
    return ", ".join("-" if x is None else f"{x:.{nd}f}" for x in xs)


class Metric(NamedTuple):
    name: str                       # AcceptanceMetrics field and summary/JSON key
    label: str                      # row label in tables and the text report
    definition: str
    source: str                     # who defines it, and under which names engines print it
    fmt: Callable = lambda v: v     # value -> what a table shows


METRICS: tuple[Metric, ...] = (
    Metric("accept_length", "tau: accept length (1 + accepted/steps)",
           "1 + accepted / verify_steps (bonus token included)",
           "EAGLE tau; vLLM 'Mean acceptance length'; SGLang 'accept len'; gpt-fast "
           "'Mean Accepted' is tau - 1", lambda v: round(v, 3)),
    Metric("verify_steps", "verify steps", "target verify forwards (cycles), pooled over prompts",
           "SGLang forward_ct; vLLM num_drafts"),
    Metric("accepted", "accepted drafts", "drafts accepted, pooled", "vLLM 'Accepted'"),
    Metric("drafted", "drafted", "verify_steps * k", "vLLM 'Drafted'"),
    Metric("per_position_acceptance", "vLLM per-position acceptance (unconditional)",
           "#cycles accepting position i / #cycles (unconditional)",
           "vLLM 'Per-position acceptance rate'", _list),
    Metric("draft_acceptance_rate", "vLLM avg draft acceptance rate",
           "accepted / drafted", "vLLM 'Avg Draft acceptance rate'; SGLang accept rate after "
           "PR #23530 (accepted/proposed)", lambda v: f"{100 * v:.1f}%"),
    Metric("conditional_alpha", "EAGLE n-alpha (conditional)",
           "#cycles accepting i / #cycles accepting 0..i-1", "EAGLE-1 paper n-alpha", _list),
    Metric("accept_histogram", "accepted-count histogram m=0..k",
           "fraction of cycles accepting exactly m drafts", "gpt-fast 'Acceptance probs'",
           lambda v: _list(v, 2)),
    Metric("accept_counts", "accepted-count histogram (counts)",
           "cycles accepting exactly m drafts", "gpt-fast", lambda v: ", ".join(map(str, v))),
    Metric("sglang_accept_rate_by_draft_tokens", "SGLang accept rate = len/(k+1) (PR #13212)",
           "accept_len / num_draft_tokens (num_draft_tokens = k + 1 for a chain)",
           "SGLang PR #13212 to #23530", lambda v: round(v, 3)),
)
FORMULAS = {m.name: m.definition for m in METRICS}


def summary(m: AcceptanceMetrics) -> dict:
    """{name: value} for every metric in the table, plus both engines' log lines (JSON-ready)."""
    out = {x.name: getattr(m, x.name) for x in METRICS}
    out.update(sglang_log_line=sglang_log_line(m), vllm_log_line=vllm_log_line(m))
    return out


def table_column(m: AcceptanceMetrics) -> dict:
    """{label: shown value} for every metric in the table, plus the SGLang log line."""
    col = {x.label: x.fmt(getattr(m, x.name)) for x in METRICS}
    col["SGLang log line"] = sglang_log_line(m)
    return col


def report_lines(m: AcceptanceMetrics) -> list[str]:
    """The text report: one line per metric, then the lines SGLang and vLLM would log."""
    return [f"{x.label}: {x.fmt(getattr(m, x.name))}" for x in METRICS] + [
        f"SGLang (accept_len/num_draft_tokens): {sglang_log_line(m)}",
        f"SGLang (accepted/proposed): {sglang_log_line(m, 'by_drafts')}",
        f"vLLM: {vllm_log_line(m)}"]


def acceptance_metrics(accept_counts: list[int], depth: int) -> AcceptanceMetrics:
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
        accept_histogram=[h / n for h in hist], accept_counts=hist,
        sglang_accept_rate_by_draft_tokens=tau / (depth + 1))


def from_stats(stats_list) -> AcceptanceMetrics:
    """Pool several SpecStats of the same depth, as the engines pool requests."""
    depths = {s.depth for s in stats_list}
    if len(depths) != 1:
        raise ValueError(f"cannot pool traces of different depths {sorted(depths)}")
    return acceptance_metrics([a for s in stats_list for a in s.accept_counts], depths.pop())


def sglang_log_line(m: AcceptanceMetrics, formula: str = "by_draft_tokens") -> str:
    """The decode log line SGLang prints, under the chosen accept-rate formula."""
    if formula not in ("by_draft_tokens", "by_drafts"):
        raise ValueError(f"unknown SGLang accept-rate formula {formula!r}")
    rate = m.sglang_accept_rate_by_draft_tokens if formula == "by_draft_tokens" \
        else m.draft_acceptance_rate                       # accepted / proposed (PR #23530)
    return f"accept len: {m.accept_length:.2f}, accept rate: {rate:.2f}"


def vllm_log_line(m: AcceptanceMetrics) -> str:
    per = ", ".join(f"{r:.3f}" for r in m.per_position_acceptance)
    return (f"SpecDecoding metrics: Mean acceptance length: {m.accept_length:.2f}, "
            f"Accepted: {m.accepted} tokens, Drafted: {m.drafted} tokens, "
            f"Per-position acceptance rate: {per}, "
            f"Avg Draft acceptance rate: {100 * m.draft_acceptance_rate:.1f}%")
