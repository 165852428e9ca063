"""llama-server log lines about speculative decoding -> numbers (formats from
`tools/server/server-context.cpp` of the llama.cpp vendored by llama-cpp-python 0.3.36):

- at the end of every request (`print_timings`, INFO):
  "draft acceptance = %0.5f (%5d accepted / %5d generated), mean len = %5.2f"
  with mean len = 1 + accepted / verify steps of that request;
- per verify step, only with the environment variable LLAMA_TRACE set (INFO):
  "accepted %2zu/%2zu draft tokens" (accepted drafts / drafted tokens of that step); a chain's
  accepted-count histogram, hence tau and per-position acceptance exactly, follows from them;
- with `-lv 4` or more (TRACE): "acc per pos = (a, b, ...)" per request.
`logs.parse_log` calls these; nothing here raises on bad text.
"""
from __future__ import annotations

import re

LLAMA_MARK = "draft acceptance ="
_REQUEST = re.compile(r"draft acceptance = (\d+(?:\.\d+)?) \(\s*(\d+) accepted /\s*(\d+) generated\), "
                      r"mean len =\s*(\d+(?:\.\d+)?)")
_STEP = re.compile(r"accepted\s+(\d+)/\s*(\d+) draft tokens")
_PER_POS = re.compile(r"acc per pos = \(([\d.,\s]*)\)")


def parse_llama_line(line: str) -> dict | None:
    """One end-of-request line -> the kit's log columns; None when it is cut short."""
    m = _REQUEST.search(line)
    if not m:
        return None
    ratio, acc, gen, mean = m.groups()
    return {"accept_length": float(mean), "draft_acceptance_rate": float(ratio),
            "accepted_tokens": float(acc), "drafted_tokens": float(gen), "per_position": None}


def step_counts(text: str) -> list[tuple[int, int]]:
    """(accepted, drafted) per verify step, in log order (LLAMA_TRACE lines)."""
    return [(int(a), int(d)) for a, d in _STEP.findall(text)]


def llama_summary(text: str, rows) -> dict:
    """Pooled numbers: from the per-request lines (drafted/accepted; tau when the step lines give
    the verify steps) and from the per-step lines (the exact accepted-count histogram)."""
    out = {"requests": len(rows)}
    if len(rows):
        out.update(accepted_tokens=int(rows.accepted_tokens.sum()), drafted_tokens=int(rows.drafted_tokens.sum()))
        if out["drafted_tokens"]:
            out["draft_acceptance_rate"] = out["accepted_tokens"] / out["drafted_tokens"]
        # mean len = 1 + accepted / steps per request, so steps = accepted / (mean len - 1)
        steps = [a / (m - 1) for a, m in zip(rows.accepted_tokens, rows.accept_length) if m > 1]
        out["mean_accept_length_of_requests"] = float(rows.accept_length.mean())
        if len(steps) == len(rows):
            out["verify_steps_from_mean_len"] = round(sum(steps))
    steps = step_counts(text)
    if steps:
        k = max(d for _, d in steps)
        counts = [0] * (k + 1)
        for a, _ in steps:
            counts[min(a, k)] += 1
        n = len(steps)
        out.update(verify_steps=n, depth=k, accept_counts=counts,
                   accept_length=1 + sum(a for a, _ in steps) / n,
                   per_position_acceptance=[sum(counts[i + 1:]) / n for i in range(k)],
                   short_drafts=sum(d < k for _, d in steps))
    pp = [[float(x) for x in m.split(",") if x.strip()] for m in _PER_POS.findall(text)]
    if pp:
        out["per_position_lines"] = pp
    return out
