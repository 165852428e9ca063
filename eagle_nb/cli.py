"""`eagle-nb` (or `python -m eagle_nb`): capture | inspect | convert | speculate | report.

Thin: parses flags, calls the package, prints a table or JSON. No algorithm lives here.
"""
from __future__ import annotations

import argparse
import json
import sys


def _layers(spec: str, convention: str, num_layers: int) -> list[int]:
    from .capture import eagle3_layers, to_hf
    if spec == "eagle3":
        return list(eagle3_layers(num_layers))
    if spec == "all":
        return list(range(num_layers + 1))
    try:
        ids = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--layers: expected 'eagle3', 'all' or comma-separated integers, got {spec!r}")
    return to_hf(ids, convention)


def cmd_capture(a) -> int:
    import torch

    from .capture import capture, norm_profile, num_decoder_layers
    from .targets import load_target
    model, tok = load_target(a.target, device=a.device)
    L = num_decoder_layers(model, a.layers_path)
    ids = _layers(a.layers, a.convention, L)
    x = tok(a.prompt, return_tensors="pt")["input_ids"].to(next(model.parameters()).device)
    with torch.no_grad(), capture(model, ids, layers_path=a.layers_path) as states:
        model(input_ids=x)
    fused = states.fused()
    out = {"num_layers": L, "hidden_size": int(states[ids[0]].shape[-1]), "layer_ids": states.layer_ids,
           "convention_input": a.convention, "layers_path": states.layers_path,
           "states": [{"layer_id": k, "name": states.key(k), "shape": list(states[k].shape),
                       "dtype": str(states[k].dtype).replace("torch.", ""), "mean_norm": mean}
                      for k, mean, _ in norm_profile(states)],
           "fused_shape": list(fused.shape)}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{L} decoder layers at {states.layers_path}; captured HF ids {states.layer_ids}")
        print(states.table().to_string(index=False))
    return 0


def cmd_inspect(a) -> int:
    from .checkpoints import CheckpointError, inspect_checkpoint
    tcfg = None
    if a.target:
        from transformers import AutoConfig
        tcfg = AutoConfig.from_pretrained(a.target)
        tcfg = tcfg.get_text_config() if hasattr(tcfg, "get_text_config") else tcfg
    try:
        rep, _ = inspect_checkpoint(a.path, tcfg)
    except CheckpointError as e:
        print(json.dumps({"path": a.path, "ok": False, "problems": [str(e)]}) if a.json else f"ERROR: {e}")
        return 2
    d = rep.as_dict()
    if a.json:
        print(json.dumps(d, indent=2, default=str))
    else:
        for k, v in d.items():
            print(f"{k:>22}: {v}")
    return 0 if rep.ok else 1


def cmd_convert(a) -> int:
    from .checkpoints import convert, inspect_checkpoint
    before, _ = inspect_checkpoint(a.src)
    out = convert(a.src, a.dst, a.to, target=a.target)
    after, _ = inspect_checkpoint(out)
    print(f"wrote {a.to} checkpoint to {out}")
    for line in conversion_lines(before, after, verbose=a.verbose):
        print(line)
    return 0


def conversion_lines(before, after, verbose: bool = False) -> list[str]:
    """What a conversion changed, from the validation reports of source and destination: tensor
    names (aligned on eagle_nb's own name), how the layer ids are written, the d2t verdict."""
    src = {ours: key for key, (ours, _) in before.key_names.items() if ours}
    dst = {ours: key for key, (ours, _) in after.key_names.items() if ours}
    renamed = [(src[o], dst[o]) for o in sorted(src) if o in dst and src[o] != dst[o]]
    lines = [f"format {before.format} -> {after.format}; {len(renamed)} of {len(dst)} tensors renamed"
             + (":" if renamed else "")]
    lines += [f"  {s} -> {d}" for s, d in (renamed if verbose else renamed[:6])]
    if len(renamed) > 6 and not verbose:
        lines.append(f"  ... and {len(renamed) - 6} more (--verbose lists all)")
    missing = sorted(set(src) - set(dst))
    if missing:
        lines.append(f"  not written: {', '.join(missing)}")

    def ids(rep):
        w = rep.ids_as_written
        return ("not written (EAGLE default)" if w is None else
                f"{w['ids']} in eagle_config (output-of-layer ids)" if w["convention"] == "sglang-config"
                else f"{w['ids']} at top level (HF ids)")
    lines.append(f"layer ids: {ids(before)} -> {ids(after)}")
    lines.append(f"d2t: {before.d2t_verdict} -> {after.d2t_verdict}")
    return lines


def cmd_speculate(a) -> int:
    from .corpus import read_prompts
    from .session import run_prompts
    prompts = [a.prompt] if a.prompt is not None else read_prompts(a.prompts)
    result = run_prompts(target=a.target, drafter=a.drafter, prompts=prompts, depth=a.depth,
                         max_new_tokens=a.max_new_tokens, temperature=a.temperature, seed=a.seed,
                         faults=tuple(a.ablate), device=a.device, check_reference=True)
    if a.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print(result.report_text())
        print(speedup_line(result))
    return 0


def speedup_line(result) -> str:
    """Measured speedup over target-only greedy decoding of the same prompts on this machine."""
    spec, ref = result.tokens_per_s, result.reference_tokens_per_s
    if not spec or not ref:
        return ("speedup: not measured (the target-only reference is decoded only at temperature 0)")
    return (f"speedup: {spec / ref:.2f}x over target-only greedy decoding on this machine "
            f"({spec:.0f} vs {ref:.0f} tokens/s)")


def cmd_report(a) -> int:
    from .report import build_reports
    params = dict(p.split("=", 1) for p in a.param)
    index = build_reports(a.out, params=params, notebooks=a.notebook or None, verbose=a.verbose)
    print(f"reports written; open {index}")
    return 0


def quiet() -> None:
    """No library progress bars or advisory warnings (model loading); our own progress stays."""
    import os
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"      # read by transformers at import
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


def main(argv=None) -> None:
    from .cli_help import document
    ap = argparse.ArgumentParser(prog="eagle-nb")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("capture", help="capture target hidden states at layer ids")
    p.add_argument("--target", default=None, help="HF checkpoint dir (default: the shipped target)")
    p.add_argument("--prompt", required=True)
    p.add_argument("--layers", default="eagle3", help="eagle3 | all | comma-separated ids")
    p.add_argument("--convention", default="hf",
                   choices=["hf", "vllm", "speculators", "eagle", "sglang", "sglang-config", "specforge"])
    p.add_argument("--layers-path", default=None, help="explicit dotted path of the decoder layer list")
    p.add_argument("--device", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_capture)

    p = sub.add_parser("inspect", help="detect format and validate a drafter checkpoint")
    p.add_argument("path")
    p.add_argument("--target", default=None, help="target checkpoint to check the drafter against")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_inspect)

    p = sub.add_parser("convert", help="convert a drafter checkpoint between formats")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--to", required=True, choices=["eagle", "sglang", "speculators"])
    p.add_argument("--target", default=None, help="supplies embed_tokens when the source has none")
    p.set_defaults(fn=cmd_convert)

    p = sub.add_parser("speculate", help="speculative decoding with acceptance metrics")
    p.add_argument("--target", default=None)
    p.add_argument("--drafter", default=None)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt")
    g.add_argument("--prompts", help="JSON lines with a 'prompt' field")
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32)   # as the notebooks
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ablate", action="append", default=[], metavar="NAME",
                   help="named fault (repeatable); see `eagle_nb.faults.FAULTS`")
    p.add_argument("--device", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_speculate)

    p = sub.add_parser("report", help="execute the notebooks and render HTML reports")
    p.add_argument("--out", default="reports")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--notebook", action="append", default=[], help="only these notebooks")
    p.set_defaults(fn=cmd_report)

    for each in sub.choices.values():
        each.add_argument("-v", "--verbose", action="store_true")
    document(ap)
    a = ap.parse_args(argv)
    if not a.verbose:
        quiet()
    try:
        sys.exit(a.fn(a))
    except (ValueError, FileNotFoundError) as e:
        print(f"eagle-nb {a.cmd}: error: {e}", file=sys.stderr)
        sys.exit(2)
