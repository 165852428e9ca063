"""The engine registry: one `Engine` entry per serving engine (entry.py), each defined in its own
module (vllm.py, sglang.py, llama_cpp.py), in the order logs are read (the first engine whose
lines a log holds is the one observed).

Every consumer looks engines up here: the log and metrics readers (logs.py, metrics.py), the
observation the doctor ranks (observation.py), `engine compare` (engine_run.py, comparison.py), the
CLI's `--engine` choices and `record --engine`. Adding an engine is one module plus one row;
`registered(...)` adds entries for the duration of a `with` block (tests). Knows the table only.
"""
from __future__ import annotations

from contextlib import contextmanager

from eagle_nb.engines import llama_cpp, sglang, vllm
from eagle_nb.engines.entry import Engine

ENGINES: tuple[Engine, ...] = (vllm.ENTRY, sglang.ENTRY, llama_cpp.ENTRY)


def entry(name: str) -> Engine:
    """The entry `name`; an unknown name is an error naming the known ones."""
    for e in ENGINES:
        if e.name == name:
            return e
    raise ValueError(f"unknown engine {name!r}; known: {[e.name for e in ENGINES]}")


def names(*, runs_here: bool = False, records: bool = False) -> list[str]:
    """Engine names in registry order: all, or those launched here / that record a target."""
    return [e.name for e in ENGINES if (not runs_here or e.runs_here) and (not records or e.record)]


@contextmanager
def registered(*engines: Engine):
    """Add entries (after the others) for the duration of a `with` block."""
    global ENGINES
    old = ENGINES
    known = {e.name for e in old}
    dup = [e.name for e in engines if e.name in known]
    if dup:
        raise ValueError(f"engine names must be unique: {dup}")
    ENGINES = old + tuple(engines)
    try:
        yield
    finally:
        ENGINES = old
