"""The engine side of a comparison: the same token-id prompts through an engine of the registry (a
server launched here and stopped afterwards, a running `server`, or a `url`), with the acceptance
counters scraped before and after and the server's log parsed. Everything engine-specific (how
its server starts, how prompts are sent, when its counters and log have caught up) is its entry's
(registry.py). `comparison.py` puts the result beside the reference loop. Knows servers and
endpoints; no models.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from eagle_nb.engines import registry
from eagle_nb.engines.logs import ParsedLog, parse_log
from eagle_nb.engines.metrics import Counters, scrape


@dataclass
class EngineRun:
    counters: Counters                         # after - before
    outputs: list                              # generated ids per prompt (None where not returned)
    log: ParsedLog | None = None               # the server's log, when the server is ours
    url: str | None = None
    drafter: str | None = None                 # what the engine served (None: unknown, a URL)
    launched_here: bool = False
    startup_s: float | None = None
    timings: list = field(default_factory=list)   # per answer, where the engine returns them
    after: object = None                       # what `then(url)` returned, run after the counters


def unavailable_reason(engine: str) -> str | None:
    """Why the engine cannot be launched here (None when it can), for skips and notebooks."""
    e = registry.entry(engine)
    if not e.runs_here:
        return f"{e.label} is read from its logs and /metrics only; the kit does not launch it"
    return e.unavailable() if e.unavailable else None


def launch(engine: str, target, drafter, depth: int, *, startup_timeout: float, server_kw=None):
    """A started server of `engine` for a target and a drafter, in the entry's default dtype unless
    `server_kw` names one."""
    e = registry.entry(engine)
    if not e.runs_here:
        raise ValueError(f"the kit does not launch {e.label}; choose from {registry.names(runs_here=True)}")
    kw = {"dtype": e.dtype, **(server_kw or {})}
    return e.server(target, drafter, depth, startup_timeout=startup_timeout, **kw).start()


def read_log(e, server, counters: Counters, timeout: float = 10.0) -> ParsedLog:
    """The server's parsed log, once the entry says it has caught up with its counters (the
    server's totals: its log holds every line since it started)."""
    deadline = time.monotonic() + timeout
    while True:
        p = parse_log(server.log_text())
        if e.log_settled is None or e.log_settled(p, counters) or time.monotonic() > deadline:
            return p
        time.sleep(0.25)


def run_on_engine(engine: str, ids, *, max_new_tokens: int, temperature: float, seed: int,
                  url=None, server=None, target=None, drafter=None, depth: int = 4,
                  startup_timeout: float = 900.0, server_kw=None, concurrency: int | None = None,
                  then=None) -> EngineRun:
    """Send `ids` (token-id prompts) to the engine, `concurrency` requests in flight where the
    engine's entry takes it, and return the counter delta and outputs. `then(url)` runs on the
    same server once the counters are read (a probe whose traffic is not counted)."""
    e = registry.entry(engine)
    if concurrency is not None and not e.concurrency:
        raise ValueError(f"{e.label}: the kit sends its requests one at a time; concurrency "
                         f"{concurrency} applies to {registry.names(runs_here=True)} entries that take it")
    more = {} if concurrency is None else {"concurrency": concurrency}
    own = None
    if url is None and server is None:
        own = server = launch(engine, target, drafter, depth, startup_timeout=startup_timeout,
                              server_kw=server_kw)
    try:
        u = url or server.url
        before = scrape(u)
        out, timings = e.complete(u, ids, max_new_tokens, temperature, seed, **more)
        after = e.settle(lambda: scrape(u), before, out) if e.settle else scrape(u)
        log = None if server is None else read_log(e, server, after)
        extra = then(u) if then is not None else None
    finally:
        if own is not None:
            own.stop()
    return EngineRun(after - before, out, log, url or server.url,
                     None if url else str(getattr(server, "drafter", drafter)), own is not None,
                     getattr(own, "startup_s", None), timings, extra)
