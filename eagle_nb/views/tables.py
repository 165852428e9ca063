"""Display tables of speculation results: every acceptance metric per setting, tau per depth,
the log lines the engines would print, and one prompt's verify steps as text.

Each function takes `RunResult`s by name, `Sweep.curves()` or one `RunResult`, and returns a pandas
DataFrame. Reads no file, runs no model, draws nothing.
"""
from __future__ import annotations

import pandas as pd

from eagle_nb.views.palette import token_text


def metrics_table(results: dict) -> pd.DataFrame:
    """Every acceptance metric (metrics.METRICS), one column per named RunResult."""
    from eagle_nb.experiment.results import metrics_frame
    return metrics_frame(results)


def tau_table(curves: dict) -> pd.DataFrame:
    """tau per depth (rows) and curve (columns). `curves`: {name: {k: RunResult}} (Sweep.curves)."""
    return pd.DataFrame({name: {k: round(r.metrics.accept_length, 3) for k, r in sorted(c.items())}
                         for name, c in curves.items()}).rename_axis("depth k")


def log_lines(results: dict) -> pd.DataFrame:
    """The decode log lines SGLang (both accept-rate formulas) and vLLM would print per setting.
    Each SGLang line ends with the formula and releases of its accept rate (`metrics.
    SGLANG_RATE_FORMULAS`), so a line copied out of the table (a notebook's recorded value, the
    index page, a panel) still says which rate it shows."""
    from eagle_nb.loop.metrics import sglang_log_line, vllm_log_line
    rows = []
    for name, r in results.items():
        m = r.metrics
        rows.append({"setting": name,
                     "SGLang (len/(k+1))": sglang_log_line(m, "by_draft_tokens", label=True),
                     "SGLang (accepted/drafted)": sglang_log_line(m, "by_drafts", label=True),
                     "vLLM": vllm_log_line(m)})
    return pd.DataFrame(rows).set_index("setting")


def trace_table(result, tokenizer=None, prompt: int = 0, max_steps: int | None = 20) -> pd.DataFrame:
    """One row per verify step of one prompt: the k drafts (✓ accepted, ✗ first rejected, · never
    checked) and the target's token at the first rejected position (its correction) or after the
    last draft (the bonus)."""
    st = result.stats[prompt]
    rows = []
    for n, step in enumerate(st.steps[:max_steps]):
        a = step.accepted
        marks = []
        for i, t in enumerate(step.draft_tokens):
            flag = "✓" if i < a else ("✗" if i == a else "·")
            marks.append(f"{flag}{token_text(tokenizer, t)!r}")
        marks += ["·(not computed)"] * (st.depth - len(step.draft_tokens))   # one pass: after a rejection
        kind = "correction" if a < len(step.draft_tokens) else "bonus"
        rows.append({"step": n, "accepted": a, "drafts": "  ".join(marks),
                     "target token": f"{token_text(tokenizer, step.target_tokens[a])!r} ({kind})"})
    return pd.DataFrame(rows).set_index("step")
