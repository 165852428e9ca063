"""Faults written into a copy of a drafter checkpoint, so a real engine meets the same fault the
kit's switch simulates. Each writer is `(src, dst) -> None`: `dst` is already a copy of `src`
and is changed in place; `src` is only named in messages. A fault's registry entry names its writer
(`experiment.faults`, field `checkpoint`); `engines.write_broken_drafter` makes the copy.

- `shift_aux_ids(+1 / -1)`: `eagle_aux_hidden_state_layer_ids` in config.json shifted by one (the
  engine then captures other target layers; the kit's switch shifts the captured ids).
- `d2t_as_absolute`: the offsets read as absolute target ids, written so that an engine which adds
  the draft index (`i + d2t[i]`) lands on `offset[i]`: the stored table is `offset - arange`, the
  hand "fix" of someone who took the offsets for ids. Draft id i then becomes target id
  `offset[i]`, exactly what the kit's `d2t-absolute` switch simulates. (Storing `offset + arange`
  instead sends ids past the vocabulary; vLLM 0.32 CPU then dies with an IndexError on the first
  request, measured here, so that variant is not a silent fault.)
- `random_embedding`: `embed_tokens.weight` replaced by random normal values of the same scale
  (an exporter that wrote an untrained embedding; the kit's `embed-random` switch, another draw).
`GGUF_FAULTS` names the faults gguf_write.py plants in a GGUF drafter instead (its `fault=`); they
are listed here, where no torch is imported, so `eagle-nb convert --fault` offers them.
Knows checkpoint files only; imports torch only when a writer runs (the fault registry names these
writers and loads without torch).
"""
from __future__ import annotations

import json
from pathlib import Path

from eagle_nb.model.fault_names import D2T_ABSOLUTE, LAYER_IDS_MINUS_1, LAYER_IDS_PLUS_1

AUX_KEY = "eagle_aux_hidden_state_layer_ids"
GGUF_ID_SHIFTS = {LAYER_IDS_PLUS_1: 1, LAYER_IDS_MINUS_1: -1}    # the aux ids written shifted by this
GGUF_FAULTS = (*GGUF_ID_SHIFTS, D2T_ABSOLUTE)


def shift_aux_ids(by: int):
    """A writer that shifts the config's aux layer ids by `by`."""
    def write(src: Path, dst: Path) -> None:
        cfg = json.loads((dst / "config.json").read_text())
        if AUX_KEY not in cfg:
            raise ValueError(f"{src / 'config.json'} has no {AUX_KEY!r} to shift (a speculators-format "
                             "checkpoint has it; EAGLE-format engines use their default layers)")
        if cfg[AUX_KEY] is None:
            raise ValueError(f"{src / 'config.json'}: {AUX_KEY!r} is null (the engine's default ids): "
                             "give the target (write_broken_drafter(..., target=)) to shift its default")
        cfg[AUX_KEY] = [int(i) + by for i in cfg[AUX_KEY]]
        (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return write


def _rewrite(dst: Path, key: str, change) -> None:
    """Replace tensor `key` in the weight file of `dst` that holds it by `change(tensor)`."""
    from safetensors import safe_open
    from safetensors.torch import save_file
    files = sorted(dst.glob("*.safetensors"))
    hit = None
    for f in files:
        with safe_open(str(f), "pt") as sf:
            names = set(sf.keys())
            if key in names:
                hit, meta = f, sf.metadata()
                state = {k: sf.get_tensor(k) for k in names}
    if hit is None:
        raise ValueError(f"no `{key}` tensor in {[str(f) for f in files]}")
    state[key] = change(state[key])
    save_file(state, str(hit), metadata=meta)


def d2t_as_absolute(src: Path, dst: Path) -> None:
    """Store `offset - arange` in place of the d2t offsets."""
    import torch
    _rewrite(dst, "d2t", lambda d2t: d2t - torch.arange(d2t.numel(), dtype=d2t.dtype))


def random_embedding(src: Path, dst: Path) -> None:
    """Store a random embed_tokens of the trained one's scale (seeded)."""
    import torch

    def change(e):
        g = torch.Generator().manual_seed(0)
        return (torch.randn(e.shape, generator=g) * e.float().std()).to(e.dtype)
    _rewrite(dst, "embed_tokens.weight", change)
