"""Acceptance metrics from one speculation trace, each defined as the engine or paper defines it
(docs/metrics.md).

Input: the per-verify-step accepted counts (0..k) of a chain of depth k, or of a tree of depth
(num_steps) k verifying `num_draft_tokens` nodes (root included; tree.py), pooled over requests as
the engines pool them. For trees, SGLang's rates use num_draft_tokens (old: accept_len / N; new:
accepted / (N - 1) proposed drafts per verify, the root slot excluded); vLLM's per-position rates
count accepted path depth; "drafted" counts the N - 1 tree nodes; conditional_alpha (EAGLE's n-alpha,
defined on chains) becomes P(some depth-i node accepted | depth i-1 reached).
`METRICS` is the one table of (name, label, definition, source, format) that the summary dict,
the text report, the DataFrame and the JSON are all built from; engines that print the same number
under another name (SGLang's accept len is tau, its post-#23530 rate is vLLM's draft acceptance
rate, gpt-fast's Mean Accepted is tau - 1) are named in its source column, not stored twice.
Knows nothing about models.
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
    # SGLang per-request meta_info `spec_accept_length`: completion tokens / verify steps (the token
    # from prefill counted), averaged over requests; None when completion counts were not given.
    sglang_spec_accept_length: float | None = None
    num_draft_tokens: int | None = None       # nodes verified per step, root included (chain: k + 1)
    # Training's per-step accuracy acc_j: step j's draft equals the target's token when steps < j
    # were fed the target's tokens (teacher forcing). Only the one pass computes it (onepass.py).
    teacher_forced_accuracy: list[float] | None = None
    teacher_forced_chain_accuracy: list[float] | None = None   # steps 0..j all right (speculators)

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
    Metric("num_draft_tokens", "num_draft_tokens (nodes verified per step, root included)",
           "k + 1 for a chain; the tree's verified nodes for topk > 1",
           "SGLang --speculative-num-draft-tokens"),
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
    Metric("sglang_spec_accept_length", "SGLang per-request spec_accept_length",
           "completion tokens / verify steps per request (prefill token included), mean over "
           "requests", "SGLang meta_info spec_accept_length (tokenizer_manager.py, 0.5.14)",
           lambda v: "-" if v is None else round(v, 3)),
    Metric("teacher_forced_accuracy", "acc_j: teacher-forced per-step accuracy (training's acc)",
           "#committed positions where draft step j (steps < j fed the target's tokens, not the "
           "drafts) equals the target's token / #such positions, j = 1..k",
           "SpecForge / SafeAILab EAGLE / speculators training logs (acc per TTT step); computed "
           "by the one pass only", lambda v: "-" if v is None else _list(v)),
    Metric("teacher_forced_chain_accuracy", "full_acc_j: teacher-forced chained accuracy",
           "#committed positions where draft steps 0..j (fed the target's tokens) are all right / "
           "#such positions, j = 1..k",
           "speculators training logs full_acc_j (cond_acc_j = full_acc_j / full_acc_j-1); "
           "computed by the one pass only", lambda v: "-" if v is None else _list(v)),
)
FORMULAS = {m.name: m.definition for m in METRICS}

# The accept rate in SGLang's decode log line, by release (read in the released wheels'
# scheduler metrics code): <= 0.5.10 accept_len / num_draft_tokens; >= 0.5.11 (PR #23530)
# accepted drafts / proposed drafts (bonus token and root slot excluded).
SGLANG_RATE_FORMULAS = {
    "by_drafts": "SGLang >= 0.5.11 (PR #23530): accepted drafts / proposed drafts",
    "by_draft_tokens": "SGLang <= 0.5.10 (PR #13212): accept len / num_draft_tokens",
}


def summary(m: AcceptanceMetrics) -> dict:
    """{name: value} for every metric in the table, plus both engines' log lines (JSON-ready)."""
    out = {x.name: getattr(m, x.name) for x in METRICS}
    out.update(sglang_log_line=sglang_log_line(m), vllm_log_line=vllm_log_line(m))
    return out


def table_column(m: AcceptanceMetrics) -> dict:
    """{label: shown value} for every metric in the table, plus the SGLang log line (naming its
    accept-rate formula, as every shown SGLang accept rate does)."""
    col = {x.label: x.fmt(getattr(m, x.name)) for x in METRICS}
    col["SGLang log line"] = sglang_log_line(m, label=True)
    return col


def report_lines(m: AcceptanceMetrics) -> list[str]:
    """The text report: one line per metric, then the lines SGLang and vLLM would log."""
    return [f"{x.label}: {x.fmt(getattr(m, x.name))}" for x in METRICS] + [
        f"SGLang >= 0.5.11 log (accepted/proposed drafts): {sglang_log_line(m)}",
        f"SGLang <= 0.5.10 log (accept_len/num_draft_tokens): {sglang_log_line(m, 'by_draft_tokens')}",
        f"vLLM: {vllm_log_line(m)}"]


def sglang_spec_accept_length(completion_tokens: int, verify_steps: int) -> float:
    """SGLang's per-request `spec_accept_length` (tokenizer_manager.py, 0.5.14): completion tokens
    over verify steps. The first token comes from prefill, not from a verify, yet is counted, so
    this exceeds tau = 1 + accepted / verify steps by about 1 / verify steps."""
    if verify_steps <= 0:
        raise ValueError(f"verify_steps must be > 0, got {verify_steps}")
    return completion_tokens / verify_steps


def acceptance_metrics(accept_counts: list[int], depth: int,
                       completions: list[tuple[int, int]] | None = None,
                       num_draft_tokens: int | None = None) -> AcceptanceMetrics:
    """`completions`: optional (completion tokens, verify steps) per request, for SGLang's
    per-request spec_accept_length. `num_draft_tokens`: tree nodes verified per step, root
    included (None: a chain, k + 1)."""
    if not accept_counts:
        raise ValueError("no verify steps: nothing to measure")
    bad = [a for a in accept_counts if not 0 <= a <= depth]
    if bad:
        raise ValueError(f"accepted counts {bad[:5]} outside 0..{depth}")
    hist = [sum(a == m for a in accept_counts) for m in range(depth + 1)]
    m = from_histogram(hist, depth, num_draft_tokens)
    if completions:
        m.sglang_spec_accept_length = sum(sglang_spec_accept_length(c, v) for c, v in completions) / len(completions)
    return m


def from_histogram(hist: list, depth: int, num_draft_tokens: int | None = None) -> AcceptanceMetrics:
    """Every metric from the histogram of accepted counts, hist[m] = verify steps accepting m
    drafts (m = 0..depth): counts, or expected counts (floats) from the T > 0 one pass
    (onepass_sampled.py), whose totals are then expected numbers of steps and drafts."""
    if len(hist) != depth + 1:
        raise ValueError(f"a histogram of depth {depth} has {depth + 1} bins, got {len(hist)}")
    n = sum(hist)
    N = depth + 1 if num_draft_tokens is None else num_draft_tokens   # verified nodes incl. root
    if not n > 0:
        raise ValueError("no verify steps: nothing to measure")
    accepted = sum(m * h for m, h in enumerate(hist))
    reach = [sum(hist[i + 1:]) for i in range(depth)]           # steps accepting position i
    tried = [sum(hist[i:]) for i in range(depth)]               # positions 0..i-1 all accepted
    tau = 1 + accepted / n
    return AcceptanceMetrics(
        depth=depth, verify_steps=n, accepted=accepted, drafted=n * (N - 1), accept_length=tau,
        per_position_acceptance=[r / n for r in reach],
        draft_acceptance_rate=accepted / (n * (N - 1)),
        conditional_alpha=[(r / t if t else None) for r, t in zip(reach, tried)],
        accept_histogram=[h / n for h in hist], accept_counts=list(hist),
        sglang_accept_rate_by_draft_tokens=tau / N, sglang_spec_accept_length=None,
        num_draft_tokens=N)


def from_stats(stats_list) -> AcceptanceMetrics:
    """Pool several SpecStats of the same depth and tree width, as the engines pool requests."""
    depths = {s.depth for s in stats_list}
    if len(depths) != 1:
        raise ValueError(f"cannot pool traces of different depths {sorted(depths)}")
    depth = depths.pop()
    widths = {getattr(s, "num_draft_tokens", None) or depth + 1 for s in stats_list}
    if len(widths) != 1:
        raise ValueError(f"cannot pool traces of different num_draft_tokens {sorted(widths)}")
    completions = [(len(s.tokens), len(s.steps)) for s in stats_list]
    if not all(c and v for c, v in completions):   # traces without their tokens: not computable
        completions = None
    return acceptance_metrics([a for s in stats_list for a in s.accept_counts], depth,
                              completions, widths.pop())


def sglang_log_line(m: AcceptanceMetrics, formula: str = "by_drafts", label: bool = False) -> str:
    """The decode log line SGLang prints, under the chosen accept-rate formula: "by_drafts" (the
    current one, SGLang >= 0.5.11) or "by_draft_tokens" (<= 0.5.10). `label` appends which."""
    if formula not in SGLANG_RATE_FORMULAS:
        raise ValueError(f"unknown SGLang accept-rate formula {formula!r}; "
                         f"choose from {sorted(SGLANG_RATE_FORMULAS)}")
    rate = m.sglang_accept_rate_by_draft_tokens if formula == "by_draft_tokens" \
        else m.draft_acceptance_rate                       # accepted / proposed (PR #23530)
    line = f"accept len: {m.accept_length:.2f}, accept rate: {rate:.2f}"
    return f"{line}  [{SGLANG_RATE_FORMULAS[formula]}]" if label else line


def vllm_log_line(m: AcceptanceMetrics) -> str:
    per = ", ".join(f"{r:.3f}" for r in m.per_position_acceptance)
    return (f"SpecDecoding metrics: Mean acceptance length: {m.accept_length:.2f}, "
            f"Accepted: {m.accepted} tokens, Drafted: {m.drafted} tokens, "
            f"Per-position acceptance rate: {per}, "
            f"Avg Draft acceptance rate: {100 * m.draft_acceptance_rate:.1f}%")
