"""`eagle-nb inspect`: detect a drafter checkpoint's format and validate it (keys, shapes, layer ids,
d2t), optionally against a target's config.json; with --prompts or --features, the draft
vocabulary's coverage of a workload (conditions/workload.py). Parses flags, calls the format
registry (`checkpoints.registry.inspect`), prints; exit 0 valid, 1 problems found, 2 unreadable."""
from __future__ import annotations

import json

from eagle_nb.cli import options
from eagle_nb.io import paths


def add_parser(sub):
    D, T = options.shown(paths.SHIPPED_DRAFTER), options.shown(paths.SHIPPED_TARGET)
    p = options.command(
        sub, "inspect", help="detect format and validate a drafter checkpoint",
        description="detect a drafter checkpoint's format and validate it (keys, shapes, ids, d2t)",
        examples=f"""\
            eagle-nb inspect {D}
            eagle-nb inspect /models/EAGLE3-drafter --target /models/Llama-3.1-8B-Instruct --json
            eagle-nb inspect /tmp/drafter.gguf --target {T}   # llama.cpp GGUF
            eagle-nb inspect {D} --target {T} --prompts my_requests.jsonl""")
    p.add_argument("path", help="drafter checkpoint directory, or a llama.cpp GGUF file")
    p.add_argument("--target", default=None,
                   help="target model to check the drafter against: HF checkpoint directory or a hub "
                        "id already in the local cache; only its config.json is read (default: the "
                        "drafter is checked alone)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--prompts", metavar="FILE",
                   help="also report the draft vocabulary's coverage of this workload: the share of "
                        "the target's greedy continuation tokens the drafter can never draft, per "
                        "prompt and per language/category/domain field, and the ceiling it puts on "
                        "acceptance (needs --target, which is then loaded and run)")
    g.add_argument("--features", metavar="RECORDING",
                   help="the same coverage over a recording's continuation tokens (eagle-nb record, "
                        "SpecForge or speculators hidden-state files); no target needed")
    p.add_argument("--max-new-tokens", type=int, default=64,
                   help="with --prompts: greedy tokens decoded per prompt")
    options.depth(p)
    options.json_output(p)
    return p


def check_workload_args(a) -> list | None:
    """--prompts / --features checked before torch is imported: the rows of the prompt file (or
    None)."""
    if a.max_new_tokens < 1 or a.depth < 1:
        raise ValueError(f"--max-new-tokens ({a.max_new_tokens}) and --depth ({a.depth}) must be >= 1")
    if a.features:
        from pathlib import Path
        if not Path(a.features).exists():
            raise ValueError(f"--features {a.features}: no such recording")
    if not a.prompts:
        return None
    if not a.target:
        raise ValueError("--prompts needs --target: coverage is measured on the target's greedy "
                         "continuations of the prompts")
    from eagle_nb.io.prompts import read_prompt_rows
    return read_prompt_rows(a.prompts)


def run(a) -> int:
    rows = check_workload_args(a)
    from eagle_nb.checkpoints.registry import inspect, of_path
    from eagle_nb.io.weight_files import CheckpointError
    tcfg = None
    if a.target:
        from eagle_nb.io.target_parts import (
            read_text_config,  # config.json only: the target is never loaded
        )
        from eagle_nb.model.targets import resolve_target
        tcfg = read_text_config(resolve_target(a.target))
    workload = rows is not None or bool(a.features)
    try:
        fmt = of_path(a.path)
        if workload and not fmt.runs:
            raise ValueError(f"--prompts/--features coverage reads a drafter directory, not a {fmt.name} "
                             "file; convert it first or inspect it without them")
        rep = inspect(a.path, tcfg)          # in the path's own format (checkpoints/registry.py)
    except CheckpointError as e:
        print(json.dumps({"path": a.path, "ok": False, "problems": [str(e)]}) if a.json else f"ERROR: {e}")
        return 2
    cov, decode = None, None
    if workload:
        from eagle_nb.checkpoints.inspect import inspect_checkpoint
        _, state = inspect_checkpoint(a.path, tcfg)
        cov, decode = workload_coverage(a, rows, state, rep.config.vocab_size)
    if a.json:
        print(json.dumps({**rep.as_dict(), **({"coverage": cov.as_dict()} if cov else {})},
                         indent=2, default=str))
    else:
        print("\n".join(rep.lines()))
        if cov:
            src = f"recording {a.features}" if a.features else f"greedy continuations of {a.prompts}"
            print(f"coverage of {src}:", *("  " + x for x in cov.report_lines(decode)), sep="\n")
    return 0 if rep.ok else 1


def workload_coverage(a, rows, state, vocab_size: int):
    """(coverage, token decoder or None) of the prompt file (the target loaded and run) or of the
    recording."""
    from eagle_nb.conditions import workload as W
    inside = W.drafter_mask(state, vocab_size)
    if a.features:
        from eagle_nb.recordings.recording import Recording
        return W.recording_coverage(inside, Recording(a.features), a.depth), None
    from eagle_nb.model.targets import load_target, resolve_target
    target, tok = load_target(resolve_target(a.target))
    return W.prompt_coverage(inside, target, tok, rows, a.max_new_tokens, a.depth), tok.decode
