"""What the serving engine reported, as one `Observation`: τ and per-position acceptance at a depth,
from numbers the user typed, an engine log, or a Prometheus `/metrics` page.

Formats (docs/metrics.md): vLLM logs
`SpecDecoding metrics: Mean acceptance length: 1.05, ..., Per-position acceptance rate: 0.05, ...`
and exposes `vllm:spec_decode_num_drafts[_total]`, `..._num_draft_tokens`, `..._num_accepted_tokens`,
`..._num_accepted_tokens_per_pos{position="i"}`; SGLang logs `accept len: 1.05, accept rate: 0.21`
in its decode-batch lines and exposes the gauge `sglang:spec_accept_length`. The lines and samples
are read by `io.engine_logs` and `io.prometheus` (the readers `engines` uses too); this module
pools them into one observation behind one entry point, `read_observation`. Unknown or malformed
lines are counted, never fatal. Crash texts are recognised by crashes.py. An SGLang log's depth
comes from its two numbers, as `eagle-nb engine log` infers it (loop/sglang_formula.py): 1.05 and
0.21 fit `accept_len / num_draft_tokens` with 5 draft tokens only, so a chain of k = 4.
Knows nothing about models.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from eagle_nb.io.engine_logs import scan
from eagle_nb.io.prometheus import read_spec_metrics


@dataclass
class Observation:
    source: str                             # 'numbers', 'vllm log', 'sglang log', 'metrics url'
    tau: float
    depth: int | None = None                # draft tokens per verify step, when known
    per_position: list[float] | None = None
    engine: str | None = None               # 'vllm' | 'sglang' | None
    crash_lines: list[str] = field(default_factory=list)
    lines: int = 0                          # metric lines pooled
    unparsed: int = 0                       # lines that mention acceptance but did not parse
    tau_se: float = 0.0                     # spread of tau over the pooled lines (standard error)
    depth_note: str | None = None           # how the depth was inferred, when the log did not state it

    def as_dict(self) -> dict:
        return asdict(self)


def from_numbers(tau: float, per_position=None, depth: int | None = None) -> Observation:
    per = [float(x) for x in per_position] if per_position else None
    if per and depth and len(per) != depth:
        raise ValueError(f"--observed-per-position has {len(per)} values but --depth is {depth}")
    if not 1.0 <= tau <= 1 + (depth or len(per or []) or 64):
        raise ValueError(f"observed tau {tau} outside [1, 1 + depth]: tau counts the bonus token")
    return Observation("numbers", float(tau), depth or (len(per) if per else None), per)


def _mean_se(xs: list[float]) -> tuple[float, float]:
    n = len(xs)
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return m, (var / n) ** 0.5


def parse_log(text: str) -> Observation:
    """Pool every vLLM SpecDecoding line or every SGLang accept-len line. Crash lines are attached
    (crashes.recognise)."""
    from eagle_nb.doctor.crashes import recognise
    lines = scan(text)
    vllm = [r for r in lines.rows if r["engine"] == "vllm"]
    sglang = [r["accept_length"] for r in lines.rows if r["engine"] == "sglang"]
    rates = [r.get("accept_rate") for r in lines.rows if r["engine"] == "sglang"]
    unparsed = lines.counts["malformed"] + lines.other_mentions
    crash = [name_line[1] for name_line in recognise(text)]
    if vllm:
        taus = [r["accept_length"] for r in vllm]
        pers = [r["per_position"] for r in vllm if r["per_position"]]
        depth = len(pers[0]) if pers else None
        pers = [p for p in pers if len(p) == depth]
        per = [sum(col) / len(col) for col in zip(*pers)] if pers else None
        tau, se = _mean_se(taus)
        if per is not None:      # chain drafting: tau = 1 + sum of per-position rates
            tau = 1 + sum(per)
        return Observation("vllm log", tau, depth, per, "vllm", crash, len(vllm), unparsed, se)
    if sglang:
        tau, se = _mean_se(sglang)
        depth, note = sglang_depth(sglang, rates)
        return Observation("sglang log", tau, depth, None, "sglang", crash, len(sglang), unparsed, se,
                           note)
    if crash:
        return Observation("log (crash)", float("nan"), None, None, None, crash, 0, unparsed)
    raise ValueError(f"no vLLM 'SpecDecoding metrics' line, SGLang 'accept len' line or known "
                     f"engine error found ({unparsed} acceptance-like lines did not parse)")


def parse_metrics(text: str) -> Observation:
    """Prometheus text exposition from a vLLM or SGLang server."""
    m = read_spec_metrics(text)
    drafts = m.totals.get("num_drafts")
    if drafts:
        acc = m.totals.get("num_accepted_tokens", 0.0)
        rates = [a / drafts for a in m.accepted_per_pos] or None
        return Observation("metrics url", 1 + acc / drafts, len(rates) if rates else None, rates,
                           "vllm", lines=int(drafts))
    if "spec_accept_length" in m.gauges:
        return Observation("metrics url", m.gauges["spec_accept_length"], engine="sglang", lines=1)
    raise ValueError("no vllm:spec_decode_* counters (or zero drafts) and no sglang:spec_accept_length "
                     "gauge in the metrics text")


def read_observation(*, log: str | None = None, url: str | None = None, tau: float | None = None,
                     per_position=None, depth: int | None = None) -> Observation | None:
    """The one entry point: exactly one of a log file path, a server URL or numbers (or none)."""
    given = [x is not None for x in (log, url, tau)]
    if sum(given) > 1:
        raise ValueError("give one of an engine log, a metrics URL or an observed tau, not several")
    if per_position is not None and tau is None:
        raise ValueError("--observed-per-position needs --observed-tau")
    if log is not None:
        from pathlib import Path
        p = Path(log)
        if not p.exists():
            raise FileNotFoundError(f"engine log {log}: no such file")
        return parse_log(p.read_text(errors="replace"))
    if url is not None:
        import urllib.request
        u = url if url.rstrip("/").endswith("/metrics") else url.rstrip("/") + "/metrics"
        with urllib.request.urlopen(u, timeout=10) as r:   # noqa: S310 - the user's own server
            obs = parse_metrics(r.read().decode(errors="replace"))
        obs.source = f"metrics url {u}"
        return obs
    if tau is not None:
        return from_numbers(tau, per_position, depth)
    return None


def sglang_depth(lengths, rates) -> tuple[int | None, str | None]:
    """(chain depth, how it was inferred) from SGLang's accept len / accept rate pairs: the one
    formula and draft-token count that explain every line (loop/sglang_formula.py); a chain verifies
    k + 1 tokens (topk 1). (None, why not) when the rates are missing or do not decide."""
    from eagle_nb.loop.sglang_formula import FORMULAS, infer_sglang_formula
    if not rates or any(r is None for r in rates):
        return None, "the log lines carry no accept rate: give --depth"
    f = infer_sglang_formula(lengths, rates)
    n = f.get("num_draft_tokens")
    if f["formula"] not in FORMULAS or f["explains"] < 1.0 or not n:
        return None, (f"accept len / accept rate do not decide the draft-token count "
                      f"({f['formula']}): give --depth")
    return n - 1, (f"k = {n - 1} inferred from accept len / accept rate: {FORMULAS[f['formula']]} with "
                   f"{n} draft tokens, a chain (topk 1)")
