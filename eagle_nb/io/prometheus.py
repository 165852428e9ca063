"""Prometheus text exposition (an engine's `/metrics` page) -> its speculative-decoding numbers:
the one reader of `/metrics`, used by `engines.endpoint` (counters to difference) and
`doctor.observed` (one observation).

vLLM exposes counters (`vllm:spec_decode_num_drafts[_total]`, `..._num_draft_tokens`,
`..._num_accepted_tokens`, `..._num_accepted_tokens_per_pos{position="i"}`); samples are summed over
label sets other than `position` (several engines or models behind one server add up). SGLang
exposes gauges (`sglang:spec_accept_length`, `sglang:spec_accept_rate`, ...) of its last log
interval. Unparseable lines are skipped. Knows metric names only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

VLLM_PREFIX = "vllm:spec_decode_"
SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str):
    """(name, labels dict, value) for every sample line; comments and unparseable lines skipped."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        yield m.group(1), dict(LABEL.findall(m.group(2) or "")), v


@dataclass
class SpecMetrics:
    """What one `/metrics` page says about speculative decoding."""
    engine: str                                   # "vllm", "sglang" or "none"
    totals: dict = field(default_factory=dict)    # vLLM counters by base name ("num_drafts", ...)
    accepted_per_pos: list[float] = field(default_factory=list)   # vLLM, by position
    gauges: dict = field(default_factory=dict)    # SGLang spec_* gauges (spec_accept_length, ...)
    generation_tokens: float = 0.0                # vllm:generation_tokens_total (to spot other traffic)


def read_spec_metrics(text: str) -> SpecMetrics:
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    gauges: dict[str, float] = {}
    gen = 0.0
    for name, labels, v in samples(text):
        if name.startswith(VLLM_PREFIX) and not name.endswith("_created"):
            base = name[len(VLLM_PREFIX):].removesuffix("_total")
            if base == "num_accepted_tokens_per_pos":
                if "position" in labels:
                    i = int(labels["position"])
                    per_pos[i] = per_pos.get(i, 0.0) + v
            else:
                totals[base] = totals.get(base, 0.0) + v
        elif name == "vllm:generation_tokens_total":
            gen += v
        elif name.startswith("sglang:spec_"):
            gauges[name[len("sglang:"):]] = v
    if totals or per_pos:
        k = max(per_pos) + 1 if per_pos else 0
        return SpecMetrics("vllm", totals, [per_pos.get(i, 0.0) for i in range(k)], {}, gen)
    return SpecMetrics("sglang" if gauges else "none", gauges=gauges)
