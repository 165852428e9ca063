"""Engine log text -> the acceptance lines it carries, for vLLM and SGLang: the one reader of
engine logs, used by `engines.logs` (acceptance over time) and `doctor.observed` (one pooled
observation).

Lines understood (formats from the engines' own source):
- vLLM (`vllm/v1/spec_decode/metrics.py`): "SpecDecoding metrics: Mean acceptance length: %.2f,
  Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens,
  Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%"
  (fields are read by name, so older lines without throughputs parse too);
- SGLang (`scheduler_metrics_mixin.py`): "Decode batch, #running-req: N, ..., accept len: %.2f,
  accept rate: %.2f, ...". The line is the same under both accept-rate formulas SGLang printed
  (`loop.metrics.SGLANG_RATE_FORMULAS`).
A line that names speculation but does not parse (cut short, a field missing) is malformed: counted
and kept as an example, never an error; nothing here raises on bad text. Knows log text only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

VLLM_MARK = "SpecDecoding metrics:"
SGLANG_MARK = "accept len"
NUM = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
VLLM_FIELDS = {
    "accept_length": rf"Mean acceptance length:\s*{NUM}",
    "accepted_throughput": rf"Accepted throughput:\s*{NUM}",
    "drafted_throughput": rf"Drafted throughput:\s*{NUM}",
    "accepted_tokens": rf"Accepted:\s*{NUM} tokens",
    "drafted_tokens": rf"Drafted:\s*{NUM} tokens",
    "draft_acceptance_rate": rf"(?:Avg )?Draft acceptance rate:\s*{NUM}%",
}
PER_POS = re.compile(r"Per-position acceptance rate:\s*((?:\d+(?:\.\d+)?(?:,\s*)?)+)")
SGLANG_FIELDS = {
    "accept_length": rf"accept len:\s*{NUM}",
    "accept_rate": rf"accept rate:\s*{NUM}",
    "running_req": rf"#running-req:\s*{NUM}",
    "gen_throughput": rf"gen throughput \(token/s\):\s*{NUM}",
}
# timestamp text and its strptime format, per engine
TIMES = {"vllm": (re.compile(r"(\d\d-\d\d \d\d:\d\d:\d\d)"), "%m-%d %H:%M:%S"),   # INFO 11-30 08:50:01
         "sglang": (re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"), "%Y-%m-%d %H:%M:%S")}  # [2025-11-13 10:00:00


@dataclass
class LogScan:
    """`rows`: one dict per acceptance line (line_no, time text or None, engine, its fields);
    `malformed`: {line_no, text} of lines that name speculation but do not parse; `counts`: lines,
    vllm, sglang, malformed, other; `other_mentions`: other lines that still mention acceptance."""
    rows: list[dict] = field(default_factory=list)
    malformed: list[dict] = field(default_factory=list)
    counts: dict = field(default_factory=lambda: {"lines": 0, "vllm": 0, "sglang": 0, "malformed": 0,
                                                  "other": 0})
    other_mentions: int = 0


def fields(line: str, spec: dict) -> dict:
    out = {}
    for name, pat in spec.items():
        m = re.search(pat, line)
        if m:
            out[name] = float(m.group(1))
    return out


def parse_vllm(line: str) -> dict | None:
    """None for a line cut short: every vLLM version ends it with a % rate or the per-position list."""
    f = fields(line, VLLM_FIELDS)
    tail = line.rstrip()
    if "accept_length" not in f or not (tail.endswith("%") or tail[-1:].isdigit()):
        return None
    m = PER_POS.search(line)
    f["per_position"] = [float(x) for x in re.findall(r"\d+(?:\.\d+)?", m.group(1))] if m else None
    if "draft_acceptance_rate" in f:
        f["draft_acceptance_rate"] /= 100.0
    return f


def parse_sglang(line: str) -> dict | None:
    f = fields(line, SGLANG_FIELDS)
    return f if "accept_length" in f and "accept_rate" in f else None


def time_text(line: str, engine: str) -> str | None:
    m = TIMES[engine][0].search(line)
    return m.group(1) if m else None


def scan(text: str) -> LogScan:
    """Every acceptance line of an engine log, in order."""
    out = LogScan()
    for no, line in enumerate(text.splitlines(), 1):
        out.counts["lines"] += 1
        if VLLM_MARK in line:
            engine, f = "vllm", parse_vllm(line)
        elif SGLANG_MARK in line:
            engine, f = "sglang", parse_sglang(line)
        else:
            out.counts["other"] += 1
            out.other_mentions += "acceptance" in line.lower()
            continue
        if f is None:
            out.counts["malformed"] += 1
            out.malformed.append({"line_no": no, "text": line[:300]})
            continue
        out.counts[engine] += 1
        out.rows.append({"line_no": no, "time": time_text(line, engine), "engine": engine, **f})
    return out
