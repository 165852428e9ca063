"""What a serving engine reported, as one `Observation`: τ and per-position acceptance at a depth,
from numbers the user typed, an engine log, a file of an engine's responses carrying per-request
metrics, or a Prometheus `/metrics` page. The doctor ranks it.

The lines and samples are read by the one log reader (logs.py) and the one `/metrics` reader
(metrics.py); which engine they are, and how its lines pool into τ and a depth, is its registry
entry's (`observe`): the first engine in registry order whose lines the log holds is observed.
Counters give τ = 1 + accepted / drafts and per-position rates; an engine with gauges only gives
its τ gauge. Crash texts are recognised by crashes.py and attached. Unknown or malformed lines are
counted, never fatal.

A file given as a log is read as responses instead when, and only when, its text starts with `{`
or `[` and parses as JSON (a list, one object, or JSON lines; io/files.py `parse_json_values`):
engine logs are text lines (SGLang's start with `[`, a timestamp, and do not parse). Responses
are read by the first engine entry with `read_responses` that accepts them (vLLM's per-request
metrics): τ and the per-position rates of their pooled histogram, the depth they state, each
request's τ, and the standard error of those as `tau_se`. A JSON file no entry reads is an error
naming the file and the field it lacks. `observe` is the one entry point. Knows nothing about
models.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from eagle_nb.engines import crashes, registry
from eagle_nb.engines.entry import mean_se
from eagle_nb.engines.logs import ParsedLog, parse_log
from eagle_nb.engines.metrics import Counters, fetch_metrics, metrics_url, parse_metrics
from eagle_nb.engines.server import EngineError
from eagle_nb.io.files import PROMPTS_CAP, UserFileError, parse_json_values, read_bytes


@dataclass
class Observation:
    source: str                             # 'numbers', '<engine> log', '<engine> responses FILE',
                                            # 'metrics url ...'
    tau: float
    depth: int | None = None                # draft tokens per verify step, when known
    per_position: list[float] | None = None
    engine: str | None = None               # the registry name of who reported it, or None
    crash_lines: list[str] = field(default_factory=list)
    lines: int = 0                          # metric lines pooled
    unparsed: int = 0                       # lines that mention acceptance but did not parse
    tau_se: float = 0.0                     # spread of tau over the pooled lines or requests (SE)
    depth_note: str | None = None           # how the depth was inferred, when the log did not state it
    per_request_tau: list[float] | None = None   # each request's tau, from a responses file

    def as_dict(self) -> dict:
        return asdict(self)


def from_numbers(tau: float, per_position=None, depth: int | None = None) -> Observation:
    per = [float(x) for x in per_position] if per_position else None
    if per and depth and len(per) != depth:
        raise ValueError(f"--observed-per-position has {len(per)} values but --depth is {depth}")
    if not 1.0 <= tau <= 1 + (depth or len(per or []) or 64):
        raise ValueError(f"observed tau {tau} outside [1, 1 + depth]: tau counts the bonus token")
    return Observation("numbers", float(tau), depth or (len(per) if per else None), per)


def from_parsed(parsed: ParsedLog) -> Observation:
    """The observation of a parsed log: its first engine with lines (registry order), pooled by
    that engine's entry, with any recognised crash lines attached."""
    crash = [line for _, line in crashes.recognise(parsed.text)]
    unparsed = parsed.summary["counts"]["malformed"] + parsed.other_mentions
    for e in registry.ENGINES:
        rows = parsed.rows(e.name)
        if e.observe is None or not len(rows):
            continue
        o = {"lines": len(rows), **e.observe(rows, parsed.summary.get(e.name) or {}, parsed.text)}
        return Observation(f"{e.name} log", engine=e.name, crash_lines=crash, unparsed=unparsed, **o)
    if crash:
        return Observation("log (crash)", float("nan"), crash_lines=crash, unparsed=unparsed)
    marks = ", ".join(f"{e.label} '{e.log_mark}' line" for e in registry.ENGINES if e.log_mark)
    raise ValueError(f"no {marks} or known engine error found ({unparsed} acceptance-like lines "
                     f"did not parse)")


def from_log(text: str) -> Observation:
    return from_parsed(parse_log(text))


def json_values(text: str, path) -> list | None:
    """The values of a responses file (`parse_json_values`) when the text starts with `{` or `[`
    and parses as JSON; None for anything else (a log)."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        return parse_json_values(text, path, "responses file")
    except UserFileError:
        return None


def from_responses(values: list, source: str = "responses") -> Observation:
    """Responses carrying per-request metrics: read by the first entry whose `read_responses`
    accepts them; none accepting is an error naming the file and what each entry missed."""
    why = []
    for e in registry.ENGINES:
        if e.read_responses is None:
            continue
        try:
            profile, taus = e.read_responses(values)
        except ValueError as err:
            why.append(str(err))
            continue
        return Observation(f"{e.name} responses {source}", profile.mean_accept_length,
                           profile.num_speculative_tokens, list(profile.marginal_accept_rates), e.name,
                           lines=len(values), tau_se=mean_se(taus)[1] if taus else 0.0,
                           per_request_tau=list(taus))
    raise ValueError(f"responses file {source}: JSON, but not responses with per-request speculative metrics: "
                     + ("; ".join(why) or "no registered engine reads responses"))


def from_counters(c: Counters, source: str = "metrics url") -> Observation:
    """Counters: tau = 1 + accepted / drafts, rates accepted at i / drafts; gauges: the entry's tau gauge."""
    e = registry.entry(c.engine) if c.engine in registry.names() else None
    if e is not None and e.counts and c.num_drafts:
        rates = [a / c.num_drafts for a in c.accepted_per_pos] or None
        return Observation(source, 1 + c.num_accepted_tokens / c.num_drafts, len(rates) if rates else None,
                           rates, e.name, lines=int(c.num_drafts))
    if e is not None and e.tau_gauge in c.gauges:
        return Observation(source, c.gauges[e.tau_gauge], engine=e.name, lines=1)
    raise ValueError("no speculative-decoding counters (or zero drafts) and no acceptance-length "
                     "gauge in the metrics text (known prefixes: "
                     + ", ".join(p for e in registry.ENGINES for p in (e.counter_prefix, e.gauge_prefix) if p) + ")")


def from_metrics(text: str) -> Observation:
    """Prometheus text exposition from a registered engine's server."""
    return from_counters(parse_metrics(text))


def observe(*, log: str | None = None, url: str | None = None, tau: float | None = None,
            per_position=None, depth: int | None = None) -> Observation | None:
    """The one entry point: exactly one of a log file path (or a responses file: `json_values`),
    a server URL or numbers (or none)."""
    given = [x is not None for x in (log, url, tau)]
    if sum(given) > 1:
        raise ValueError("give one of an engine log, a metrics URL or an observed tau, not several")
    if per_position is not None and tau is None:
        raise ValueError("--observed-per-position needs --observed-tau")
    if log is not None:
        if not Path(log).exists():
            raise FileNotFoundError(f"engine log {log}: no such file")
        text = read_bytes(log, "engine log", PROMPTS_CAP).decode("utf-8", errors="replace")
        values = json_values(text, log)
        return from_log(text) if values is None else from_responses(values, str(log))
    if url is not None:
        try:
            text = fetch_metrics(url)
        except EngineError as e:
            raise OSError(str(e)) from None            # the CLI reports an unreachable URL, exit 2
        return from_counters(parse_metrics(text), f"metrics url {metrics_url(url)}")
    if tau is not None:
        return from_numbers(tau, per_position, depth)
    return None
