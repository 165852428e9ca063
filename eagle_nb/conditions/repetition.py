"""Loop-inflated workloads: how much of a continuation repeats itself, and tau with and without
those positions (docs/conditions.md, `loop-inflated-workload`).

A continuation that loops ("foo foo foo ...", a copied block) is easy for any drafter: tau measured
on it says little about the drafter (sglang PR #25359; the Kimi-K3 raw-prompt number of
lightseekorg/tokenspeed #1305 came from a 2-token loop). Definitions, over one continuation
c[0..N-1] (the generated tokens, prompt excluded):

- token j is **in a loop** when j >= n-1 and the n-gram ending at j, c[j-n+1..j], already ended at
  an earlier index i < j of the same continuation (occurrences may overlap: a run of one token
  repeated is in a loop from its (n+1)-th copy on);
- the **loop share** of a continuation is (#tokens in a loop) / N; pooled over prompts it is
  sum of in-loop tokens / sum of N (`LoopReport.share`), per prompt `LoopReport.per_prompt`;
- a verify step **drafts from** the last committed token before it: the step that emits
  continuation tokens L, L+1, ... drafts from index L-1 (the first token comes from prefill, so
  the first step drafts from index 0). The step is **loop-free** when that token is not in a loop;
  `tau_loop_free` = 1 + accepted / steps over loop-free steps only, beside tau over all steps.

Knows SpecStats' shape (tokens, per-step accepted counts); nothing about models.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

DEFAULT_N = 6


def in_loop_mask(tokens, n: int = DEFAULT_N) -> list[bool]:
    """Per token of `tokens`: whether it ends an n-gram that already ended earlier in `tokens`."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    toks = list(tokens)
    seen: set[tuple] = set()
    mask = [False] * len(toks)
    for j in range(n - 1, len(toks)):
        gram = tuple(toks[j - n + 1:j + 1])
        mask[j] = gram in seen
        seen.add(gram)
    return mask


def loop_share(tokens, n: int = DEFAULT_N) -> float | None:
    """Share of `tokens` in a loop (None for an empty continuation)."""
    mask = in_loop_mask(tokens, n)
    return sum(mask) / len(mask) if mask else None


def drafted_from(accept_counts) -> list[int]:
    """Continuation index each verify step drafts from: 0 for the first step (the prefill token),
    then the previous index + accepted + 1."""
    out, last = [], 0
    for a in accept_counts:
        out.append(last)
        last += a + 1
    return out


@dataclass
class LoopReport:
    n: int                          # n-gram length
    per_prompt: list                # loop share per prompt (None: empty continuation)
    share: float                    # pooled: in-loop tokens / tokens
    tokens: int
    loop_tokens: int
    steps: int                      # verify steps, pooled
    loop_free_steps: int
    tau: float                      # 1 + accepted / steps, every step
    tau_loop_free: float | None     # the same over loop-free steps (None: there are none)
    tau_in_loop: float | None       # the same over steps drafting from inside a loop

    def as_dict(self) -> dict:
        return asdict(self)

    def report_lines(self) -> list[str]:
        looping = sum(1 for s in self.per_prompt if s)
        fmt = (lambda v: "-" if v is None else f"{v:.3f}")
        return [f"loop share (tokens ending a repeated {self.n}-gram of their own continuation): "
                f"{100 * self.share:.1f}% of {self.tokens} tokens ({looping} of "
                f"{len(self.per_prompt)} prompts loop)",
                f"tau on loop-free verify steps: {fmt(self.tau_loop_free)} ({self.loop_free_steps} "
                f"of {self.steps} steps); in loops: {fmt(self.tau_in_loop)}; overall: {self.tau:.3f}"]


def loop_report(stats_list, n: int = DEFAULT_N) -> LoopReport:
    """The loop share and the tau split of a run's SpecStats (one per prompt; chains or trees)."""
    per, toks, in_loop = [], 0, 0
    acc = {True: [0, 0], False: [0, 0]}         # in loop -> [steps, accepted]
    for st in stats_list:
        mask = in_loop_mask(st.tokens, n)
        per.append(sum(mask) / len(mask) if mask else None)
        toks, in_loop = toks + len(mask), in_loop + sum(mask)
        for j, a in zip(drafted_from(st.accept_counts), st.accept_counts):
            if j >= len(mask):
                raise ValueError(f"a verify step drafts from continuation index {j}, past the "
                                 f"{len(mask)} tokens of its trace: tokens and steps disagree")
            acc[mask[j]][0] += 1
            acc[mask[j]][1] += a
    steps = acc[True][0] + acc[False][0]
    if not steps:
        raise ValueError("no verify steps: nothing to measure")

    def tau(s, a):
        return 1 + a / s if s else None
    return LoopReport(n, per, in_loop / toks if toks else 0.0, toks, in_loop, steps, acc[False][0],
                      tau(steps, acc[True][1] + acc[False][1]), tau(*acc[False]), tau(*acc[True]))
