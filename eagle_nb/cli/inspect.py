"""`eagle-nb inspect`: detect a drafter checkpoint's format and validate it (keys, shapes, layer ids,
d2t), optionally against a target's config.json. Parses flags, calls the format registry
(`checkpoints.registry.inspect`), prints; exit 0 valid, 1 problems found, 2 unreadable."""
from __future__ import annotations

import json

from eagle_nb.cli import options


def add_parser(sub):
    p = options.command(
        sub, "inspect", help="detect format and validate a drafter checkpoint",
        description="detect a drafter checkpoint's format and validate it (keys, shapes, ids, d2t)",
        examples="""\
            eagle-nb inspect data/drafter_speculators
            eagle-nb inspect /models/EAGLE3-drafter --target /models/Llama-3.1-8B-Instruct --json
            eagle-nb inspect /tmp/drafter.gguf --target data/target   # llama.cpp GGUF""")
    p.add_argument("path", help="drafter checkpoint directory, or a llama.cpp GGUF file")
    p.add_argument("--target", default=None,
                   help="target model to check the drafter against: HF checkpoint directory or a hub "
                        "id already in the local cache; only its config.json is read (default: the "
                        "drafter is checked alone)")
    options.json_output(p)
    return p


def run(a) -> int:
    from eagle_nb.checkpoints.registry import inspect
    from eagle_nb.io.weight_files import CheckpointError
    tcfg = None
    if a.target:
        from eagle_nb.io.target_parts import (
            read_text_config,  # config.json only: the target is never loaded
        )
        from eagle_nb.model.targets import resolve_target
        tcfg = read_text_config(resolve_target(a.target))
    try:
        rep = inspect(a.path, tcfg)          # in the path's own format (checkpoints/registry.py)
    except CheckpointError as e:
        print(json.dumps({"path": a.path, "ok": False, "problems": [str(e)]}) if a.json else f"ERROR: {e}")
        return 2
    print(json.dumps(rep.as_dict(), indent=2, default=str) if a.json else "\n".join(rep.lines()))
    return 0 if rep.ok else 1
