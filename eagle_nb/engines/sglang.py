"""SGLang as an engine entry: read from its log and its `/metrics` page only (the kit does not
launch it). Facts from SGLang's own source:

- log (`scheduler_metrics_mixin.py`): "Decode batch, #running-req: N, ..., accept len: %.2f,
  accept rate: %.2f, ...". The line is the same under both accept-rate formulas SGLang printed
  (`loop.metrics.SGLANG_RATE_FORMULAS`); which one a log used, and so how many draft tokens it
  verified, is inferred from the numbers (`engines.sglang_formula`): 1.05 and 0.21 fit
  `accept_len / num_draft_tokens` with 5 draft tokens only, so a chain of k = 4;
- `/metrics`: gauges `sglang:spec_accept_length`, `sglang:spec_accept_rate` of the last log
  interval, which cannot be differenced around a run.
Knows SGLang's lines and gauges; no model code.
"""
from __future__ import annotations

from eagle_nb.engines.entry import NUM, Engine, fields, mean_se
from eagle_nb.loop.metrics import SGLANG_RATE_FORMULAS as FORMULAS
from eagle_nb.engines.sglang_formula import infer_sglang_formula

NAME = "sglang"
FIELDS = {
    "accept_length": rf"accept len:\s*{NUM}",
    "accept_rate": rf"accept rate:\s*{NUM}",
    "running_req": rf"#running-req:\s*{NUM}",
    "gen_throughput": rf"gen throughput \(token/s\):\s*{NUM}",
}


def parse_line(line: str) -> dict | None:
    f = fields(line, FIELDS)
    return f if "accept_length" in f and "accept_rate" in f else None


def summarise(s, text: str, num_draft_tokens=None) -> tuple[dict | None, dict]:
    """Mean accept len and rate, and the accept-rate formula the numbers fit; with it, each line's
    accepted share of the drafts (`draft_acceptance_rate`)."""
    if not len(s):
        return None, {}
    out = {"lines": len(s), "mean_accept_length": float(s.accept_length.mean()),
           "mean_accept_rate": float(s.accept_rate.mean()),
           **infer_sglang_formula(s.accept_length.tolist(), s.accept_rate.tolist(), num_draft_tokens)}
    n = out["num_draft_tokens"]
    if out["formula"] in FORMULAS and n:
        return out, {"draft_acceptance_rate": (s.accept_length - 1) / (n - 1)}
    return out, {}


def depth_of(lengths, rates) -> tuple[int | None, str | None]:
    """(chain depth, how it was inferred) from SGLang's accept len / accept rate pairs: the one
    formula and draft-token count that explain every line; a chain verifies k + 1 tokens (topk 1).
    (None, why not) when the rates are missing or do not decide."""
    if not rates or any(r is None or r != r for r in rates):
        return None, "the log lines carry no accept rate: give --depth"
    f = infer_sglang_formula(lengths, rates)
    n = f.get("num_draft_tokens")
    if f["formula"] not in FORMULAS or f["explains"] < 1.0 or not n:
        return None, (f"accept len / accept rate do not decide the draft-token count "
                      f"({f['formula']}): give --depth")
    return n - 1, (f"k = {n - 1} inferred from accept len / accept rate: {FORMULAS[f['formula']]} with "
                   f"{n} draft tokens, a chain (topk 1)")


def observe(s, summary: dict, text: str) -> dict:
    """tau: the mean accept len of the lines; the depth their accept rates imply."""
    lengths = list(s.accept_length)
    tau, se = mean_se(lengths)
    depth, note = depth_of(lengths, list(s.accept_rate))
    return {"tau": tau, "depth": depth, "tau_se": se, "depth_note": note}


ENTRY = Engine(
    NAME, "SGLang", log_mark="accept len", parse_line=parse_line,
    time_pattern=(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", "%Y-%m-%d %H:%M:%S"),
    summarise=summarise, observe=observe,
    gauge_prefix="sglang:spec_", tau_gauge="spec_accept_length")
