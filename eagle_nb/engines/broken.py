"""Write deliberately broken copies of a drafter checkpoint, one per named fault, so an engine can
be shown the same fault the kit's switch (`eagle_nb.experiment.faults`) simulates.

Which faults can be written, and how, is a field of each fault's registry entry (`checkpoint`, a
writer from `checkpoints.broken`). Works on a copy; the source is never touched. Knows checkpoint
files only.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from eagle_nb.experiment import faults as F


def checkpoint_faults() -> tuple[str, ...]:
    """The faults a broken checkpoint can be written for, in registry order."""
    return tuple(f.name for f in F.REGISTRY if f.checkpoint is not None)


def write_broken_drafter(src, dst, fault: str) -> Path:
    """Copy the checkpoint directory `src` to `dst` with `fault` applied; returns `dst`."""
    known = checkpoint_faults()
    if fault not in known:
        raise ValueError(f"unknown checkpoint fault {fault!r}; known: {list(known)}")
    src, dst = Path(src), Path(dst)
    if not (src / "config.json").is_file():
        raise FileNotFoundError(f"{src / 'config.json'}: not a drafter checkpoint directory")
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    F.entry(fault).checkpoint(src, dst)
    return dst
