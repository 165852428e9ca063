"""`eagle-nb inspect FILE.gguf` and `eagle-nb convert SRC DST.gguf --to gguf`: the GGUF side of the
checkpoint commands (cli/main.py hands over when the path is a GGUF file or `--to gguf`).

Thin: calls `eagle_nb.checkpoints.gguf_read` / `gguf_write`, prints a summary or JSON.
"""
from __future__ import annotations

import json
from pathlib import Path


def cmd_inspect_gguf(a, tcfg) -> int:
    from eagle_nb.checkpoints.gguf_read import inspect_gguf
    from eagle_nb.io.weight_files import CheckpointError
    try:
        rep = inspect_gguf(a.path, tcfg)
    except CheckpointError as e:
        print(json.dumps({"path": a.path, "ok": False, "problems": [str(e)]}) if a.json else f"ERROR: {e}")
        return 2
    if a.json:
        print(json.dumps(rep, indent=2, default=str))
    else:
        tensors = rep.pop("tensors")
        for k, v in rep.items():
            print(f"{k:>22}: {v}")
        print(f"{'tensors':>22}: {len(tensors)} (GGUF shapes, ne0 first)")
        for name, (shape, typ) in tensors.items():
            print(f"{'':>24}{name:<28} {shape!s:<14} {typ}")
    return 0 if rep["ok"] else 1


def is_target_dir(src) -> bool:
    """An HF causal-LM directory that is not an EAGLE-3 drafter (no draft_vocab_size, > 1 layer)."""
    from eagle_nb.io.files import read_json_object
    f = Path(src) / "config.json"
    if not f.is_file():
        return False
    c = read_json_object(f, "config")
    return ("draft_vocab_size" not in c and c.get("num_hidden_layers", 1) > 1
            and "speculators_model_type" not in c)


def cmd_convert_gguf(a) -> int:
    """Write a target (stock Llama) or a drafter (any format, needs --target) as GGUF, then read
    the result back through the GGUF reader and print what llama.cpp will see."""
    from eagle_nb.checkpoints.gguf_read import inspect_gguf
    from eagle_nb.checkpoints.gguf_write import write_drafter_gguf, write_target_gguf
    if is_target_dir(a.src):
        if a.fault:
            raise ValueError("--fault applies to a drafter, not to a target")
        out = write_target_gguf(a.src, a.dst, force=a.force)
        role = "target"
    else:
        out = write_drafter_gguf(a.src, a.dst, a.target, fault=a.fault, force=a.force)
        role = "drafter" + (f" (planted fault: {a.fault})" if a.fault else "")
    rep = inspect_gguf(out)
    print(f"wrote {role} GGUF to {out} ({out.stat().st_size / 2**20:.1f} MiB, "
          f"{len(rep['tensors'])} tensors, float32)")
    if rep["role"] == "drafter":
        print(f"eagle3.target_layers: {rep['target_layers']} ({rep['layer_id_convention']})")
        print(f"d2t: {rep['d2t_verdict']}")
    for p in rep["problems"]:
        print(f"problem: {p}")
    return 0
