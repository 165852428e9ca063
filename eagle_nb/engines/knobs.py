"""The engines' synthetic-acceptance knobs and chain flags, read from their registry entries
(`knobs`, `render_knobs`, `draft_flags`): what makes an engine accept drafts as a profile says,
without running the drafter (capacity and latency studies), and the flags of the draft length
`eagle-nb tune` finds best. What a profile gives a knob is `profiles/knobs.py`; which engine takes
which is its entry (vllm.py, sglang.py, trtllm.py). Knows the registry; nothing about processes.

    settings(engine, profile, k, drafter=) -> dict      render(engine, settings) -> str
    draft_flags(k) -> {engine: flags}                     flags_line(k) -> str
"""
from __future__ import annotations

from eagle_nb.engines import registry
from eagle_nb.profiles.profile import ProfileError


def names() -> list[str]:
    """Engines with synthetic-acceptance knobs, in registry order."""
    return registry.names(knobs=True)


def _entry(engine: str):
    if engine not in names():
        raise ProfileError(f"unknown engine {engine!r}; choose from {', '.join(names())}")
    return registry.entry(engine)


def settings(engine: str, p, k: int | None = None, drafter: str | None = None) -> dict:
    """The engine's settings from profile `p` at draft length k (the profile's when None; never
    deeper); `drafter` is the draft model's path where the engine's config names it."""
    return _entry(engine).knobs(p, k, drafter)


def render(engine: str, s: dict) -> str:
    """The settings as the lines a user pastes (flags, environment, config)."""
    return _entry(engine).render_knobs(s)


def draft_flags(k: int) -> dict:
    """{engine: its chain flags for draft length k} (k = 0: {engine: why speculation is off})."""
    return {e.name: e.draft_flags(k) for e in registry.ENGINES if e.draft_flags}


def flags_line(k: int) -> str:
    """One line: each engine's flags for draft length k ("k=v" for config keys, "--flag v")."""
    flags = draft_flags(k)
    if not flags:
        return f"k = {k}" if k else "no speculation"
    if k == 0:
        return f"no speculation ({next(iter(flags.values()))})"
    labels = {e.name: e.label for e in registry.ENGINES}
    return f"k = {k}; " + "; ".join(
        f"{labels[name]} " + " ".join(f"{f} {v}" if f.startswith("-") else f"{f}={v}"
                                      for f, v in fl.items())
        for name, fl in flags.items())
