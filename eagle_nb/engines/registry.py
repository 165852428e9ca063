"""The engine registry: one `Engine` entry per serving engine (entry.py), each defined in its own
module (vllm.py, sglang.py, llama_cpp.py, trtllm.py), in the order logs are read (the first engine
whose lines a log holds is the one observed).

Every consumer looks engines up here: the log and metrics readers (logs.py, metrics.py), the
observation the doctor ranks (observation.py), `engine compare` (engine_run.py, comparison.py), the
CLI's `--engine` choices and `record --engine`, the knobs and chain flags of `eagle-nb profile --to`
and `eagle-nb tune` (knobs.py), the doctor's capture table and serving notes. Adding an engine is one module plus one row;
`registered(...)` adds entries for the duration of a `with` block (tests). Knows the table only.
"""
from __future__ import annotations

from contextlib import contextmanager

from eagle_nb.engines import llama_cpp, sglang, trtllm, vllm
from eagle_nb.engines.entry import Engine

ENGINES: tuple[Engine, ...] = (vllm.ENTRY, sglang.ENTRY, llama_cpp.ENTRY, trtllm.ENTRY)


def entry(name: str) -> Engine:
    """The entry `name`; an unknown name is an error naming the known ones."""
    for e in ENGINES:
        if e.name == name:
            return e
    raise ValueError(f"unknown engine {name!r}; known: {[e.name for e in ENGINES]}")


def names(*, runs_here: bool = False, records: bool = False, knobs: bool = False) -> list[str]:
    """Engine names in registry order: all, or those launched here / that record a target / that
    have synthetic-acceptance knobs."""
    return [e.name for e in ENGINES if (not runs_here or e.runs_here) and (not records or e.record)
            and (not knobs or e.knobs)]


def target_needs() -> list[str]:
    """What each engine's target class must do to hand the drafter aux states (registry order)."""
    return [e.target_needs for e in ENGINES if e.target_needs]


def captures(raw_cfg: dict, default: list[int]) -> dict[str, list[int]]:
    """{who: HF ids it would capture} over every engine that says, for a drafter's raw config."""
    out = {}
    for e in ENGINES:
        if e.captures:
            out.update(e.captures(raw_cfg, default))
    return out


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
