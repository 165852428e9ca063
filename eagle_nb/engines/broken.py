"""Write deliberately broken copies of a drafter checkpoint, one per named fault, so an engine can
be shown the same fault the kit's ablation (`eagle_nb.experiment.faults`) simulates.

- `layer-ids+1` / `layer-ids-1`: `eagle_aux_hidden_state_layer_ids` in config.json shifted by one
  (the engine then captures other target layers; the kit's ablation shifts the captured ids).
- `d2t-absolute`: the offsets read as absolute target ids, written so that an engine which adds
  the draft index (`i + d2t[i]`) lands on `offset[i]`: the stored table is `offset - arange`, the
  hand "fix" of someone who took the offsets for ids. Draft id i then becomes target id
  `offset[i]`, exactly what the kit's `d2t-absolute` ablation simulates. (Storing `offset + arange`
  instead sends ids past the vocabulary; vLLM 0.32 CPU then dies with an IndexError on the first
  request, measured here, so that variant is not a silent fault.)
- `embed-random`: `embed_tokens.weight` replaced by random normal values of the same scale (an
  exporter that wrote an untrained embedding; the kit's `embed-random` ablation, another draw).
Works on a copy; the source is never touched. Knows checkpoint files only.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

FAULTS = ("layer-ids+1", "layer-ids-1", "d2t-absolute", "embed-random")
AUX_KEY = "eagle_aux_hidden_state_layer_ids"


def write_broken_drafter(src, dst, fault: str) -> Path:
    """Copy the checkpoint directory `src` to `dst` with `fault` applied; returns `dst`."""
    if fault not in FAULTS:
        raise ValueError(f"unknown checkpoint fault {fault!r}; known: {list(FAULTS)}")
    src, dst = Path(src), Path(dst)
    if not (src / "config.json").is_file():
        raise FileNotFoundError(f"{src / 'config.json'}: not a drafter checkpoint directory")
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    if fault.startswith("layer-ids"):
        cfg = json.loads((dst / "config.json").read_text())
        if AUX_KEY not in cfg:
            raise ValueError(f"{src / 'config.json'} has no {AUX_KEY!r} to shift (a speculators-format "
                             "checkpoint has it; EAGLE-format engines use their default layers)")
        shift = 1 if fault.endswith("+1") else -1
        cfg[AUX_KEY] = [int(i) + shift for i in cfg[AUX_KEY]]
        (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    else:
        key = "d2t" if fault == "d2t-absolute" else "embed_tokens.weight"
        files = sorted(dst.glob("*.safetensors"))
        hit = None
        for f in files:
            with safe_open(str(f), "pt") as sf:
                if key in sf.keys():
                    hit, meta = f, sf.metadata()
                    state = {k: sf.get_tensor(k) for k in sf.keys()}
        if hit is None:
            raise ValueError(f"no `{key}` tensor in {[str(f) for f in files]}")
        t = state[key]
        if fault == "d2t-absolute":
            state[key] = t - torch.arange(t.numel(), dtype=t.dtype)
        else:
            g = torch.Generator().manual_seed(0)
            state[key] = (torch.randn(t.shape, generator=g) * t.float().std()).to(t.dtype)
        save_file(state, str(hit), metadata=meta)
    return dst
