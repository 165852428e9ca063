"""The engine side of a comparison: the same token-id prompts through vLLM or llama.cpp (a server
launched here and stopped afterwards, a running `server`, or a `url`), with the acceptance
counters scraped before and after and the server's log parsed. `compare.py` puts the result
beside the reference loop. Knows servers and endpoints; no models.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from eagle_nb.engines.endpoint import Counters, Endpoint
from eagle_nb.engines.logs import ParsedLog, parse_log

ENGINES = ("vllm", "llama.cpp")


@dataclass
class EngineRun:
    counters: Counters                         # after - before
    outputs: list                              # generated ids per prompt (None where not returned)
    log: ParsedLog | None = None               # the server's log, when the server is ours
    url: str | None = None
    drafter: str | None = None                 # what the engine served (None: unknown, a URL)
    launched_here: bool = False
    startup_s: float | None = None
    timings: list = field(default_factory=list)   # llama.cpp: each answer's `timings`


def unavailable_reason(engine: str) -> str | None:
    """Why the engine cannot be launched here (None when it can), for skips and notebooks."""
    if engine == "llama.cpp":
        from eagle_nb.engines.llama_cpp import llama_unavailable_reason
        return llama_unavailable_reason()
    from eagle_nb.engines.server import engine_unavailable_reason
    return engine_unavailable_reason()


def _log_caught_up(server, drafted_total: float, timeout: float = 10.0) -> ParsedLog:
    """The server's parsed log once its SpecDecoding lines account for every drafted token the
    counters saw (vLLM logs on a timer, so the last lines come up to an interval later)."""
    deadline = time.monotonic() + timeout
    while True:
        p = parse_log(server.log_text())
        if p.summary.get("vllm", {}).get("drafted_tokens", 0) >= drafted_total or time.monotonic() > deadline:
            return p
        time.sleep(0.25)


def launch(engine: str, target, drafter, depth: int, *, startup_timeout: float, server_kw=None):
    """A started server of `engine` for an HF target and a drafter (llama.cpp: HF directories are
    converted to GGUF, or GGUF files are served as they are)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose from {ENGINES}")
    if engine == "llama.cpp":
        from eagle_nb.engines.llama_cpp import LlamaServer
        return LlamaServer(target, drafter, depth, startup_timeout=min(startup_timeout, 300.0),
                           **(server_kw or {})).start()
    from eagle_nb.engines.server import VllmServer
    return VllmServer(target, drafter, depth, startup_timeout=startup_timeout, **(server_kw or {})).start()


def run_on_engine(engine: str, ids, *, max_new_tokens: int, temperature: float, seed: int,
                  url=None, server=None, target=None, drafter=None, depth: int = 4,
                  startup_timeout: float = 900.0, server_kw=None) -> EngineRun:
    """Send `ids` (token-id prompts) to the engine and return the counter delta and outputs."""
    own = None
    if url is None and server is None:
        own = server = launch(engine, target, drafter, depth, startup_timeout=startup_timeout,
                              server_kw=server_kw)
    timings = []
    try:
        ep = Endpoint(url or server.url)
        before = ep.scrape()
        if engine == "llama.cpp":
            from eagle_nb.engines.llama_cpp import complete, settled_scrape
            # stop at EOS as the reference loop does: llama.cpp's ignore_eos bans EOS (a -inf
            # logit bias), which changes the greedy token where the target wants to stop
            out, timings = complete(ep.url, ids, max_new_tokens, temperature,
                                    seed=seed if temperature else None, ignore_eos=False)
            after = settled_scrape(ep, before, sum(len(o) for o in out))
            log = None if server is None else parse_log(server.log_text())
        else:
            out = ep.complete(ids, max_new_tokens, temperature, seed=seed if temperature else None)
            after = ep.scrape()
            log = None if server is None else _log_caught_up(server, after.num_draft_tokens)
    finally:
        if own is not None:
            own.stop()
    return EngineRun(after - before, out, log, url or server.url,
                     None if url else str(getattr(server, "drafter", drafter)), own is not None,
                     getattr(own, "startup_s", None), timings)
