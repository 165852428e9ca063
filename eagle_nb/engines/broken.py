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


def write_broken_drafter(src, dst, fault: str, target=None) -> Path:
    """Copy the checkpoint directory `src` to `dst` with `fault` applied; returns `dst`. A config
    whose aux layer ids are null (the engine's EAGLE default, implicit) gets that default written
    first when `target` (its directory) is given, so a layer-id fault has ids to shift."""
    known = checkpoint_faults()
    if fault not in known:
        raise ValueError(f"unknown checkpoint fault {fault!r}; known: {list(known)}")
    src, dst = Path(src), Path(dst)
    if not (src / "config.json").is_file():
        raise FileNotFoundError(f"{src / 'config.json'}: not a drafter checkpoint directory")
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    if target is not None:
        explicit_default_ids(dst, target)
    F.entry(fault).checkpoint(src, dst)
    return dst


def explicit_default_ids(dst: Path, target) -> None:
    """Write the EAGLE default ids for `target`'s layer count where the config at `dst` leaves them
    implicit: null in a speculators config (its convention), absent from an EAGLE-format one
    (vLLM's top-level field, which vLLM and the kit read when present, checkpoints/detect.py)."""
    import json

    from eagle_nb.checkpoints.broken import AUX_KEY
    from eagle_nb.model.layers import eagle3_layers, from_hf
    cfg_path = dst / "config.json"
    cfg = json.loads(cfg_path.read_text())
    speculators = "transformer_layer_config" in cfg
    if (AUX_KEY in cfg and cfg[AUX_KEY] is not None) or (not speculators and "eagle_config" in cfg):
        return                  # explicit already; SGLang's nested ids are not the field shifted
    tcfg = json.loads((Path(target) / "config.json").read_text())
    layers = tcfg.get("num_hidden_layers") or (tcfg.get("text_config") or {}).get("num_hidden_layers")
    if not layers:
        raise ValueError(f"{Path(target) / 'config.json'}: no num_hidden_layers, so the implicit "
                         f"aux layer ids of {cfg_path} cannot be written out")
    cfg[AUX_KEY] = from_hf(eagle3_layers(int(layers)), "speculators" if speculators else "vllm")
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
