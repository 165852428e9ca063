"""Engine log text -> a DataFrame of acceptance over time, for vLLM and SGLang.

The lines are read by `io.engine_logs` (the one reader of engine logs: formats, malformed lines);
this module tabulates them, pools vLLM's lines as its counters pool, and infers which accept-rate
formula an SGLang log used from the numbers (`infer_sglang_formula`; the formulas and their versions
are `loop.metrics.SGLANG_RATE_FORMULAS`). Nothing here raises on bad text. Knows log text only.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from eagle_nb.io.engine_logs import TIMES, scan
from eagle_nb.loop.metrics import SGLANG_RATE_FORMULAS as FORMULAS
from eagle_nb.loop.sglang_formula import infer_sglang_formula

COLUMNS = ["line_no", "time", "engine", "accept_length", "per_position", "draft_acceptance_rate",
           "accepted_tokens", "drafted_tokens", "accepted_throughput", "drafted_throughput",
           "accept_rate", "running_req", "gen_throughput"]


@dataclass
class ParsedLog:
    """`df`: one row per acceptance line; `summary`: counts, pooled numbers, malformed examples."""
    df: pd.DataFrame
    summary: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        rows = self.df.assign(time=self.df["time"].astype(str)).to_dict(orient="records")
        return {"summary": self.summary, "rows": rows}


def _time(text: str | None, engine: str):
    if text is None:
        return pd.NaT
    return pd.to_datetime(text, format=TIMES[engine][1], errors="coerce")


def parse_log(text: str, num_draft_tokens: int | None = None) -> ParsedLog:
    """Parse engine log text. `num_draft_tokens` (SGLang's `--speculative-num-draft-tokens`, k + 1
    for a chain of depth k) pins the SGLang formula check; without it, it is inferred."""
    lines = scan(text)
    rows = [dict(r, time=_time(r["time"], r["engine"])) for r in lines.rows]
    counts, malformed = lines.counts, lines.malformed
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in COLUMNS[3:]:
        if c != "per_position":
            df[c] = pd.to_numeric(df[c], errors="coerce")
    summary = {"counts": counts, "malformed_examples": malformed[:5],
               "engines": sorted(set(df["engine"]))}
    v = df[df.engine == "vllm"]
    if len(v):
        summary["vllm"] = _vllm_summary(v)
    s = df[df.engine == "sglang"]
    if len(s):
        summary["sglang"] = {"lines": len(s), "mean_accept_length": float(s.accept_length.mean()),
                             "mean_accept_rate": float(s.accept_rate.mean()),
                             **infer_sglang_formula(s.accept_length.tolist(), s.accept_rate.tolist(),
                                                    num_draft_tokens)}
        if summary["sglang"]["formula"] in FORMULAS and summary["sglang"]["num_draft_tokens"]:
            n = summary["sglang"]["num_draft_tokens"]
            df.loc[s.index, "draft_acceptance_rate"] = (s.accept_length - 1) / (n - 1)
    return ParsedLog(df, summary)


def _vllm_summary(v: pd.DataFrame) -> dict:
    """Pooled over lines as the counters pool: tau = 1 + sum(accepted) / sum(drafts)."""
    out = {"lines": len(v), "mean_accept_length_of_lines": float(v.accept_length.mean())}
    pp = [p for p in v.per_position if isinstance(p, list) and p]
    k = len(pp[0]) if pp else None
    if k and v.accepted_tokens.notna().all() and v.drafted_tokens.notna().all() and v.drafted_tokens.sum():
        drafts = v.drafted_tokens.sum() / k
        out.update(depth=k, accepted_tokens=int(v.accepted_tokens.sum()),
                   drafted_tokens=int(v.drafted_tokens.sum()),
                   accept_length=float(1 + v.accepted_tokens.sum() / drafts),
                   draft_acceptance_rate=float(v.accepted_tokens.sum() / v.drafted_tokens.sum()))
        if all(len(p) == k for p in pp) and len(pp) == len(v):
            w = v.drafted_tokens / k
            out["per_position_acceptance"] = [float(sum(p[i] * wi for p, wi in zip(pp, w)) / drafts)
                                              for i in range(k)]
    return out
