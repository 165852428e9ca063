"""Engine log text -> a DataFrame of acceptance over time, for vLLM and SGLang.

Lines understood (formats from the engines' own source):
- vLLM (`vllm/v1/spec_decode/metrics.py`): "SpecDecoding metrics: Mean acceptance length: %.2f,
  Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens,
  Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"
  (fields are read by name, so older lines without throughputs parse too);
- SGLang (`scheduler_metrics_mixin.py`): "Decode batch, #running-req: N, ..., accept len: %.2f,
  accept rate: %.2f, ...". The line is the same under both accept-rate formulas SGLang printed:
  `accept_len / num_draft_tokens` (PR #13212 to #23530) and accepted drafts / proposed drafts =
  `(accept_len - 1) / (num_draft_tokens - 1)` for a chain (after PR #23530). Which one a log used
  is inferred from the numbers (`infer_sglang_formula`).
- llama.cpp (`llama-server`, `llama_logs.py`): "draft acceptance = %0.5f (%5d accepted / %5d
  generated), mean len = %5.2f" per request, and with LLAMA_TRACE "accepted k/n draft tokens" per
  verify step (pooled in the summary into the exact accepted-count histogram).
A line that names speculation but does not parse is counted as malformed and kept in the summary;
nothing here raises on bad text. Knows log text only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from eagle_nb.engines.llama_logs import LLAMA_MARK, llama_summary, parse_llama_line

VLLM_MARK = "SpecDecoding metrics:"
SGLANG_MARK = "accept len"
_NUM = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_VLLM_FIELDS = {
    "accept_length": rf"Mean acceptance length:\s*{_NUM}",
    "accepted_throughput": rf"Accepted throughput:\s*{_NUM}",
    "drafted_throughput": rf"Drafted throughput:\s*{_NUM}",
    "accepted_tokens": rf"Accepted:\s*{_NUM} tokens",
    "drafted_tokens": rf"Drafted:\s*{_NUM} tokens",
    "draft_acceptance_rate": rf"(?:Avg )?Draft acceptance rate:\s*{_NUM}%",
}
_PER_POS = re.compile(r"Per-position acceptance rate:\s*((?:\d+(?:\.\d+)?(?:,\s*)?)+)")
_SGLANG_FIELDS = {
    "accept_length": rf"accept len:\s*{_NUM}",
    "accept_rate": rf"accept rate:\s*{_NUM}",
    "running_req": rf"#running-req:\s*{_NUM}",
    "gen_throughput": rf"gen throughput \(token/s\):\s*{_NUM}",
}
_VLLM_TIME = re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)")            # INFO 11-30 08:50:01 [metrics.py:..]
_SGLANG_TIME = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")   # [2025-11-13 10:00:00 TP0]
COLUMNS = ["line_no", "time", "engine", "accept_length", "per_position", "draft_acceptance_rate",
           "accepted_tokens", "drafted_tokens", "accepted_throughput", "drafted_throughput",
           "accept_rate", "running_req", "gen_throughput"]
FORMULAS = {
    "by_draft_tokens": "accept_len / num_draft_tokens (SGLang PR #13212 to #23530)",
    "by_drafts": "(accept_len - 1) / (num_draft_tokens - 1) = accepted / proposed drafts (after PR #23530)",
}


@dataclass
class ParsedLog:
    """`df`: one row per acceptance line; `summary`: counts, pooled numbers, malformed examples."""
    df: pd.DataFrame
    summary: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        rows = self.df.assign(time=self.df["time"].astype(str)).to_dict(orient="records")
        return {"summary": self.summary, "rows": rows}


def _fields(line: str, spec: dict) -> dict:
    out = {}
    for name, pat in spec.items():
        m = re.search(pat, line)
        if m:
            out[name] = float(m.group(1))
    return out


def _time(line: str, engine: str):
    m = (_VLLM_TIME if engine == "vllm" else _SGLANG_TIME).search(line)
    if not m:
        return pd.NaT
    fmt = "%m-%d %H:%M:%S" if engine == "vllm" else "%Y-%m-%d %H:%M:%S"
    return pd.to_datetime(m.group(1), format=fmt, errors="coerce")


def _parse_vllm(line: str) -> dict | None:
    """None for a line cut short: every vLLM version ends it with a % rate or the per-position list."""
    f = _fields(line, _VLLM_FIELDS)
    tail = line.rstrip()
    if "accept_length" not in f or not (tail.endswith("%") or tail[-1:].isdigit()):
        return None
    m = _PER_POS.search(line)
    f["per_position"] = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", m.group(1))] if m else None
    if "draft_acceptance_rate" in f:
        f["draft_acceptance_rate"] /= 100.0
    return f


def _parse_sglang(line: str) -> dict | None:
    f = _fields(line, _SGLANG_FIELDS)
    return f if "accept_length" in f and "accept_rate" in f else None


def parse_log(text: str, num_draft_tokens: int | None = None) -> ParsedLog:
    """Parse engine log text. `num_draft_tokens` (SGLang's `--speculative-num-draft-tokens`, k + 1
    for a chain of depth k) pins the SGLang formula check; without it, it is inferred."""
    rows, malformed, counts = [], [], {"lines": 0, "vllm": 0, "sglang": 0, "malformed": 0, "other": 0}
    for no, line in enumerate(text.splitlines(), 1):
        counts["lines"] += 1
        if VLLM_MARK in line:
            engine, f = "vllm", _parse_vllm(line)
        elif SGLANG_MARK in line:
            engine, f = "sglang", _parse_sglang(line)
        elif LLAMA_MARK in line:
            engine, f = "llama.cpp", parse_llama_line(line)
        else:
            counts["other"] += 1
            continue
        if f is None:
            counts["malformed"] += 1
            malformed.append({"line_no": no, "text": line[:300]})
            continue
        counts[engine] = counts.get(engine, 0) + 1        # "llama.cpp" appears when it has lines
        rows.append({"line_no": no, "time": _time(line, engine), "engine": engine, **f})
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
    lc = df[df.engine == "llama.cpp"]
    if len(lc) or "draft tokens" in text:
        summary["llama.cpp"] = llama_summary(text, lc)
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


def infer_sglang_formula(lengths, rates, num_draft_tokens: int | None = None) -> dict:
    """Which accept-rate formula fits every (accept len, accept rate) pair, allowing for the
    two-decimal rounding of both numbers. Tries num_draft_tokens 2..17 unless given.
    Returns {"formula", "num_draft_tokens", "explains": fraction of lines fitted}."""
    cands = [num_draft_tokens] if num_draft_tokens else range(2, 18)
    tol = 0.0051
    best = {"formula": "unknown", "num_draft_tokens": None, "explains": 0.0}
    fits_any = []
    for n in cands:
        for name, fn, slack in (("by_draft_tokens", lambda a: a / n, tol / n),
                                ("by_drafts", lambda a: (a - 1) / (n - 1), tol / (n - 1))):
            ok = [abs(r - fn(a)) <= tol + slack for a, r in zip(lengths, rates)]
            frac = sum(ok) / len(ok) if ok else 0.0
            if frac > best["explains"] + 1e-9:
                best = {"formula": name, "num_draft_tokens": n, "explains": frac}
            if frac == 1.0:
                fits_any.append((name, n))
    if len({f for f, _ in fits_any}) > 1:
        best["formula"] = "ambiguous"                      # e.g. every draft accepted (len == N)
        best["candidates"] = [{"formula": f, "num_draft_tokens": n} for f, n in fits_any]
    if any(r > 1.0 for r in rates):
        best = {"formula": "pre-#11572 (rate can exceed 1; formula unverified)",
                "num_draft_tokens": None, "explains": 0.0}
    best["meaning"] = FORMULAS.get(best["formula"], "")
    return best
