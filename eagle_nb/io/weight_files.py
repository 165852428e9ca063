"""Reading a drafter's weight files: `model.safetensors`, `pytorch_model.bin`, or shards listed by
`model.safetensors.index.json` / `pytorch_model.bin.index.json`.

Never executes checkpoint code (safetensors, or `torch.load(weights_only=True)`), never blocks on
a FIFO (regular files only), reads folders whose names are not UTF-8, and names the file at fault:
a missing shard, a shard lacking a name its index places there, a `.bin` that is not a
state_dict. Knows nothing about formats or key names (checkpoints/). io/lazy_weights.py reads
the same files lazily (headers first, memory-mapped or streamed tensors).
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from eagle_nb.io.files import UserFileError, check_regular, read_json_object, show

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


class CheckpointError(ValueError):
    """A drafter checkpoint cannot be loaded as asked; the message names the file and fault."""


INDEX_FILES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


def find_weights_file(path: Path) -> Path:
    """The checkpoint's weights file or shard index (first of WEIGHT_FILES + INDEX_FILES)."""
    for name in WEIGHT_FILES + INDEX_FILES:
        if os.path.lexists(path / name):
            return path / name
    raise CheckpointError(f"{show(path)}: no weights file (looked for {list(WEIGHT_FILES + INDEX_FILES)})")


def _read_one(f: Path) -> dict[str, torch.Tensor]:
    """One weights file -> {name: tensor}; never unpickles code, never blocks on a FIFO."""
    try:
        check_regular(f, "weights file", 1 << 50)
    except UserFileError as e:
        raise CheckpointError(str(e)) from None
    try:
        if f.name.endswith(".safetensors"):
            from safetensors.torch import load, load_file
            try:
                os.fsencode(f).decode("utf-8")
                state = load_file(str(f))
            except UnicodeDecodeError:     # safetensors takes UTF-8 paths only: read the bytes
                state = load(f.read_bytes())
        else:
            state = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any reader failure is a corrupt file to the user
        kind = "refused to unpickle (weights_only=True; it holds code or objects)" \
            if "weights_only" in str(e) or "Unpickl" in type(e).__name__ else "corrupt or truncated"
        raise CheckpointError(f"{show(f)}: {kind}: {type(e).__name__}: {str(e)[:200]}") from None
    return check_state_dict(state, f)


def check_state_dict(state, f: Path) -> dict[str, torch.Tensor]:
    """`state` if it is a state_dict ({str: tensor}), else a CheckpointError naming file `f`."""
    if not isinstance(state, dict):
        raise CheckpointError(f"{show(f)}: holds a {type(state).__name__}, expected a dict "
                              f"{{weight name: tensor}} (a state_dict)")
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"{show(f)}: entries {bad[:5]} are not tensors under string names; "
                              f"expected a state_dict")
    return state


def shard_map(index: Path) -> dict[str, str]:
    """`*.index.json`'s `weight_map` {name: shard file}, checked: shard names are plain file names
    in the checkpoint directory and every shard exists."""
    try:
        wmap = read_json_object(index, "shard index").get("weight_map")
    except UserFileError as e:
        raise CheckpointError(str(e)) from None
    if not isinstance(wmap, dict) or not wmap:
        raise CheckpointError(f"{show(index)}: no 'weight_map' object {{weight name: shard file}}")
    shards = sorted(set(wmap.values()), key=str)
    for sh in shards:
        if not isinstance(sh, str) or "/" in sh or "\\" in sh or sh in ("", ".", ".."):
            raise CheckpointError(f"{show(index)}: shard {sh!r} is not a file name in the checkpoint "
                                  f"directory")
    missing = [sh for sh in shards if not os.path.lexists(index.parent / sh)]
    if missing:
        raise CheckpointError(f"{show(index)}: shard file(s) {missing} listed in weight_map are "
                              f"missing from {show(index.parent)}")
    return wmap


def absent_from_shard(index: Path, wmap: dict, shard: str, names) -> None:
    """Raise when shard `shard` lacks a name the index places in it."""
    absent = [k for k, v in wmap.items() if v == shard and k not in names]
    if absent:
        raise CheckpointError(f"{show(index.parent / shard)}: lacks {absent[:5]} which "
                              f"{index.name} places in it")


def _read_sharded(index: Path) -> dict[str, torch.Tensor]:
    """`*.index.json` with a `weight_map` {name: shard file}: every shard present, every name in it."""
    wmap = shard_map(index)
    shards = sorted(set(wmap.values()), key=str)
    state: dict[str, torch.Tensor] = {}
    for sh in shards:
        part = _read_one(index.parent / sh)
        absent_from_shard(index, wmap, sh, part)
        state.update({k: v for k, v in part.items() if wmap.get(k) == sh})
    return state


def read_weights(path: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """Every tensor of the checkpoint in memory (io/lazy_weights.py reads lazily instead)."""
    f = find_weights_file(Path(path))
    return (_read_sharded(f) if f.name.endswith(".index.json") else _read_one(f)), f
