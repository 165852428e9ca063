"""The checkpoint-format registry: one `CheckpointFormat` entry per format a drafter (or target)
file can be in, with how it is detected, inspected, written, and checked by the doctor.

  eagle, sglang, speculators   a directory of config.json + weights (detect.py: the config says
                               which; key maps in `detect.KEY_MAPS`, what each can carry in
                               `formats.FORMAT_LACKS`); the doctor checks it with its own checks
                               of a drafter directory (`checks` None: doctor/static_checks.py)
  gguf                         llama.cpp's one-file format (gguf.py)

Every consumer dispatches here: `eagle-nb inspect` and `convert --to`, the doctor's static phase,
the llama.cpp engine's converter. A report from `inspect` has `.ok`, `.as_dict()` and `.lines()`.
Knows the table; the formats' code is in their modules.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from eagle_nb.checkpoints import gguf
from eagle_nb.checkpoints.formats import FORMATS


@dataclass(frozen=True)
class CheckpointFormat:
    name: str
    what: str                                      # one line, for help texts
    detect: Callable[[Path], bool] = field(repr=False)        # this path is in the format
    inspect: Callable = field(repr=False)          # (path, target text config or None) -> report
    write: Callable = field(repr=False)            # (src, dst, *, target, force, ...) -> (path, lines)
    checks: Callable | None = field(default=None, repr=False)
    #   (path, target text config dict or None) -> the doctor's check rows; None: its own checks
    #   of a drafter directory
    runs: bool = True                              # the kit's reference loop can run a drafter in it


def _directory(name: str, what: str) -> CheckpointFormat:
    def detect(path) -> bool:
        from eagle_nb.checkpoints.detect import detect_format, read_config
        p = Path(path)
        return p.is_dir() and (p / "config.json").is_file() and detect_format(read_config(p)) == name

    def inspect(path, target_config=None):
        from eagle_nb.checkpoints.inspect import inspect_checkpoint
        return inspect_checkpoint(path, target_config)[0]

    def write(src, dst, *, target=None, force=False, allow_lossy=False, drop_embed=False,
              verbose=False, **_) -> tuple[Path, list[str]]:
        from eagle_nb.checkpoints.convert import convert, conversion_lines
        notes: list[str] = []
        before = inspect(src)
        out = convert(src, dst, name, target=target, allow_lossy=allow_lossy, force=force,
                      drop_embed=drop_embed, notes=notes)
        lines = [f"wrote {name} checkpoint to {out}", *conversion_lines(before, inspect(out), verbose)]
        return out, lines + notes
    return CheckpointFormat(name, what, detect, inspect, write)


WHAT = {"eagle": "SafeAILab EAGLE directory (`midlayer.*`, plain Llama config)",
        "sglang": "SGLang/SpecForge directory (`LlamaForCausalLMEagle3`, nested eagle_config ids)",
        "speculators": "vLLM speculators directory (`layers.0.*`, top-level HF ids)"}
REGISTRY: tuple[CheckpointFormat, ...] = (
    *[_directory(n, WHAT[n]) for n in FORMATS],
    CheckpointFormat(gguf.NAME, "llama.cpp GGUF file (a drafter or a stock Llama target)", gguf.detect,
                     gguf.inspect, gguf.write, gguf.checks, runs=False),
)
BY_NAME = {f.name: f for f in REGISTRY}


def entry(name: str) -> CheckpointFormat:
    if name not in BY_NAME:
        raise ValueError(f"unknown format {name!r}; choose from {list(BY_NAME)}")
    return BY_NAME[name]


def of_path(path) -> CheckpointFormat:
    """The format whose detector accepts `path` (a CheckpointError saying why when none does: a
    directory's config names no format, or the path is neither a directory nor a known file)."""
    for f in REGISTRY:
        if f.detect(path):
            return f
    from eagle_nb.checkpoints.detect import detect_format, read_config
    return BY_NAME[detect_format(read_config(Path(path)))]     # raises, naming what is wrong


def inspect(path, target_config=None):
    """The report of `path` in its own format (`.ok`, `.as_dict()`, `.lines()`)."""
    return of_path(path).inspect(path, target_config)
