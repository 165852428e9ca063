"""Engine log text -> its acceptance lines as a table: the one reader of engine logs, used by
`eagle-nb engine log`, `engine compare` (the server's log) and the doctor's observation
(observation.py).

Each line is offered to the registered engines in order (registry.py): an engine whose mark the
line carries parses it (its entry's `parse_line`); a line that carries a mark but does not parse
(cut short, a field missing) is malformed: counted and kept as an example, never an error. Each
engine with lines then pools them its own way (`summarise`: vLLM as its counters pool, SGLang's
accept-rate formula inferred from the numbers, llama.cpp's per-step histogram) into
`summary[<engine>]`. Nothing here raises on bad text. Knows log text and the registry only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from eagle_nb.engines import registry

COLUMNS = ["line_no", "time", "engine", "accept_length", "per_position", "draft_acceptance_rate",
           "accepted_tokens", "drafted_tokens", "accepted_throughput", "drafted_throughput",
           "accept_rate", "running_req", "gen_throughput"]
@dataclass
class ParsedLog:
    """`df`: one row per acceptance line; `summary`: counts, pooled numbers per engine, malformed
    examples; `other_mentions`: lines no engine marks that still mention acceptance."""
    df: pd.DataFrame
    summary: dict = field(default_factory=dict)
    other_mentions: int = 0
    text: str = field(default="", repr=False)

    def rows(self, engine: str) -> pd.DataFrame:
        return self.df[self.df.engine == engine]

    def to_json(self) -> dict:
        rows = self.df.assign(time=self.df["time"].astype(str)).to_dict(orient="records")
        return {"summary": self.summary, "rows": rows}


def _time(line: str, engine) -> pd.Timestamp:
    if engine.time_pattern is None:
        return pd.NaT
    m = re.search(engine.time_pattern[0], line)
    return pd.NaT if m is None else pd.to_datetime(m.group(1), format=engine.time_pattern[1], errors="coerce")


def scan(text: str) -> tuple[list[dict], list[dict], dict, int]:
    """(rows, malformed {line_no, text}, counts, other lines that mention acceptance)."""
    readers = [e for e in registry.ENGINES if e.log_mark]
    counts = {"lines": 0, **{e.name: 0 for e in readers}, "malformed": 0, "other": 0}
    rows, malformed, mentions = [], [], 0
    for no, line in enumerate(text.splitlines(), 1):
        counts["lines"] += 1
        e = next((e for e in readers if e.log_mark in line), None)
        if e is None:
            counts["other"] += 1
            mentions += "acceptance" in line.lower()
            continue
        f = e.parse_line(line)
        if f is None:
            counts["malformed"] += 1
            malformed.append({"line_no": no, "text": line[:300]})
            continue
        counts[e.name] += 1
        rows.append({"line_no": no, "time": _time(line, e), "engine": e.name, **f})
    return rows, malformed, counts, mentions


def parse_log(text: str, num_draft_tokens: int | None = None) -> ParsedLog:
    """Parse engine log text. `num_draft_tokens` (SGLang's `--speculative-num-draft-tokens`, k + 1
    for a chain of depth k) pins the SGLang formula check; without it, it is inferred."""
    rows, malformed, counts, mentions = scan(text)
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in COLUMNS[3:]:
        if c != "per_position":
            df[c] = pd.to_numeric(df[c], errors="coerce")
    summary = {"counts": counts, "malformed_examples": malformed[:5], "engines": sorted(set(df["engine"]))}
    for e in registry.ENGINES:
        if e.summarise is None:
            continue
        part = df[df.engine == e.name]
        s, updates = e.summarise(part, text, num_draft_tokens)
        if s:
            summary[e.name] = s
        for column, values in updates.items():
            df.loc[part.index, column] = values
    return ParsedLog(df, summary, mentions, text)
