"""`eagle-nb` (or `python -m eagle_nb`): capture | inspect | convert | speculate | record | report | doctor | engine.

Thin: parses flags, calls the package, prints a table or JSON. No algorithm lives here.
"""
from __future__ import annotations

import argparse
import json
import sys


def _layers(spec: str, convention: str, num_layers: int) -> list[int]:
    from eagle_nb.model.layers import eagle3_layers, to_hf
    if spec == "eagle3":
        return list(eagle3_layers(num_layers))
    if spec == "all":
        return list(range(num_layers + 1))
    try:
        ids = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--layers: expected 'eagle3', 'all' or comma-separated integers, got {spec!r}")
    return to_hf(ids, convention)


def _nonempty(prompt: str) -> str:
    if not prompt:
        raise ValueError("--prompt is empty; give the text to start from, e.g. --prompt 'def f(x):'")
    return prompt


def cmd_capture(a) -> int:
    import torch

    from eagle_nb.model.capture import capture, norm_profile
    from eagle_nb.model.decoder import num_decoder_layers
    from eagle_nb.model.limits import as_input_ids, fit_prompt
    from eagle_nb.model.targets import load_target
    _nonempty(a.prompt)
    model, tok = load_target(a.target, device=a.device)
    L = num_decoder_layers(model, a.layers_path)
    ids = _layers(a.layers, a.convention, L)
    x = as_input_ids(tok(a.prompt, return_tensors="pt")["input_ids"])
    x = fit_prompt(x, model, 0, 0, where="--prompt").to(next(model.parameters()).device)
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
    from eagle_nb.checkpoints.inspect import inspect_checkpoint
    from eagle_nb.io.weight_files import CheckpointError
    tcfg = None
    if a.target:
        from eagle_nb.io.target_parts import (
            read_text_config,  # config.json only: the target is never loaded
        )
        from eagle_nb.model.targets import resolve_target
        tcfg = read_text_config(resolve_target(a.target))
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
    from eagle_nb.checkpoints.convert import convert
    from eagle_nb.checkpoints.inspect import inspect_checkpoint
    before, _ = inspect_checkpoint(a.src)
    notes: list[str] = []
    out = convert(a.src, a.dst, a.to, target=a.target, allow_lossy=a.allow_lossy, force=a.force,
                  drop_embed=a.drop_embed, notes=notes)
    after, _ = inspect_checkpoint(out)
    print(f"wrote {a.to} checkpoint to {out}")
    for line in conversion_lines(before, after, verbose=a.verbose):
        print(line)
    for n in notes:
        print(n)
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
    if a.features:
        return cmd_replay(a)
    from eagle_nb.experiment.pair import run_prompts
    from eagle_nb.experiment.setting import Setting
    from eagle_nb.io.prompts import read_prompts
    from eagle_nb.model.targets import pick_device, resolve_target
    # every flag is checked before a model is loaded (the same checks the API and notebooks use:
    # Setting runs SpecConfig's checks, the fault names and SGLang's tree-shape rules)
    Setting(faults=tuple(a.ablate), depth=a.depth, temperature=a.temperature,
            max_new_tokens=a.max_new_tokens, seed=a.seed, topk=a.topk,
            num_draft_tokens=a.num_draft_tokens)
    pick_device(a.device)
    if a.target:
        resolve_target(a.target)
    prompts = [_nonempty(a.prompt)] if a.prompt is not None else read_prompts(a.prompts)
    result = run_prompts(target=a.target, drafter=a.drafter, prompts=prompts, depth=a.depth,
                         topk=a.topk, num_draft_tokens=a.num_draft_tokens,
                         max_new_tokens=a.max_new_tokens, temperature=a.temperature, seed=a.seed,
                         faults=tuple(a.ablate), device=a.device, check_reference=True,
                         truncate_prompt=a.truncate_prompt)
    if a.json:
        print(json.dumps(result.summary(), indent=2))
    else:
        print(result.report_text())
        print(speedup_line(result))
    return 0


def cmd_record(a) -> int:
    from eagle_nb.io.prompts import read_prompts
    from eagle_nb.loop.recording import record
    from eagle_nb.model.decoder import num_decoder_layers
    from eagle_nb.model.targets import load_target
    model, tok = load_target(a.target, device=a.device, dtype=a.dtype, device_map=a.device_map)
    ids = _layers(a.layers, a.convention, num_decoder_layers(model, a.layers_path))
    prompts = [_nonempty(a.prompt)] if a.prompt is not None else read_prompts(a.prompts)
    enc = [tok(p, return_tensors="pt")["input_ids"] for p in prompts]
    out = record(model, enc, a.out, ids, max_new_tokens=a.max_new_tokens, lookahead=a.lookahead,
                 target_name=str(a.target or "shipped"), final_hidden=a.final_hidden,
                 layers_path=a.layers_path, eos_token_id=tok.eos_token_id)
    print(f"recorded {len(enc)} prompts x {a.max_new_tokens}+{a.lookahead} tokens, HF layers {ids}, to {out}")
    return 0


def cmd_replay(a) -> int:
    if a.temperature != 0 or a.ablate:
        raise ValueError("--features replays greedy speculation only: drop --temperature/--ablate "
                         "(ablations and sampling need the live target)")
    from eagle_nb.checkpoints.load import load_drafter
    from eagle_nb.io.paths import SHIPPED_DRAFTER, SHIPPED_TARGET
    from eagle_nb.loop.replay import replay
    target = a.target or (SHIPPED_TARGET if a.drafter is None else None)   # embed_tokens, read lazily
    drafter = load_drafter(a.drafter or SHIPPED_DRAFTER, target=target, device=a.device)
    from eagle_nb.loop.recording import Recording
    rec, lm_head = Recording(a.features), None
    if a.target and rec.teacher_forced:   # check the dataset text against the target's greedy choice
        from eagle_nb.io.target_parts import TargetParts
        lm_head = TargetParts(a.target).lm_head()
    res = replay(drafter, rec, depth=a.depth, max_new_tokens=a.max_new_tokens, lm_head=lm_head)
    print(json.dumps(res.summary(), indent=2) if a.json else res.report_text())
    return 0


def speedup_line(result) -> str:
    """Measured speedup over target-only greedy decoding of the same prompts on this machine."""
    spec, ref = result.tokens_per_s, result.reference_tokens_per_s
    if not spec or not ref:
        return ("speedup: not measured (the target-only reference is decoded only at temperature 0)")
    return (f"speedup: {spec / ref:.2f}x over target-only greedy decoding on this machine "
            f"({spec:.0f} vs {ref:.0f} tokens/s)")


def cmd_report(a) -> int:
    from eagle_nb.report.build import build_reports
    from eagle_nb.report.params import parse_param
    params = dict(parse_param(p) for p in a.param)
    index = build_reports(a.out, params=params, notebooks=a.notebook or None, verbose=a.verbose)
    print(f"reports written; open {index}")
    return 0


def cmd_doctor(a) -> int:
    from eagle_nb.doctor.run import doctor
    per = None
    if a.observed_per_position:
        try:
            per = [float(x) for x in a.observed_per_position.split(",") if x.strip()]
        except ValueError:
            raise SystemExit(f"--observed-per-position: expected comma-separated numbers, got "
                             f"{a.observed_per_position!r}")
    d = doctor(a.drafter, a.target, depth=a.depth, prompts=a.prompts, n_prompts=a.n_prompts,
               max_new_tokens=a.max_new_tokens, temperature=a.temperature,
               observed_log=a.observed, observed_url=a.observed_url, observed_tau=a.observed_tau,
               observed_per_position=per, dynamic=not a.static_only, progress=not a.json,
               train_log=a.train_log, train_acc=a.train_acc)
    print(d.to_json() if a.json else d.text())
    return 0 if d.healthy else 1


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
    from eagle_nb.cli.help import document
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
    p.add_argument("--allow-lossy", action="store_true",
                   help="write even when the destination format cannot express a source feature")
    p.add_argument("--force", action="store_true",
                   help="replace DST entirely when it is a non-empty directory (never allowed: DST = SRC)")
    p.add_argument("--drop-embed", action="store_true",
                   help="do not store the source's own embed_tokens (engines then use the target's)")
    p.set_defaults(fn=cmd_convert)

    p = sub.add_parser("speculate", help="speculative decoding with acceptance metrics")
    p.add_argument("--target", default=None)
    p.add_argument("--drafter", default=None)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt")
    g.add_argument("--prompts", help="JSON lines with a 'prompt' field")
    g.add_argument("--features", metavar="RECORDING",
                   help="replay against a recording (eagle-nb record, SpecForge or speculators "
                        "hidden-state files) instead of running the target; --target then only "
                        "supplies embed_tokens, read lazily")
    p.add_argument("--depth", type=int, default=4,
                   help="draft steps per cycle (SGLang --speculative-num-steps)")
    p.add_argument("--topk", type=int, default=1,
                   help="tree branching (SGLang --speculative-eagle-topk); 1 = chain")
    p.add_argument("--num-draft-tokens", type=int, default=None,
                   help="tree nodes verified per step, root included (SGLang "
                        "--speculative-num-draft-tokens); default: depth+1 for a chain, all candidates for a tree")
    p.add_argument("--max-new-tokens", type=int, default=32)   # as the notebooks
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ablate", action="append", default=[], metavar="NAME",
                   help="named fault (repeatable); see `eagle_nb.experiment.faults.FAULTS`")
    p.add_argument("--truncate-prompt", action="store_true",
                   help="keep only a prompt's last tokens when it does not fit the target's context "
                        "(default: refuse it)")
    p.add_argument("--device", default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_speculate)

    p = sub.add_parser("record", help="record the target's greedy continuations and aux states")
    p.add_argument("--target", default=None, help="HF checkpoint dir (default: the shipped target)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt")
    g.add_argument("--prompts", help="JSON lines with a 'prompt' field")
    p.add_argument("--out", required=True, help="recording directory to write")
    p.add_argument("--layers", default="eagle3", help="eagle3 | comma-separated ids (see --convention)")
    p.add_argument("--convention", default="hf",
                   choices=["hf", "vllm", "speculators", "eagle", "sglang", "sglang-config", "specforge"])
    p.add_argument("--layers-path", default=None)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--lookahead", type=int, default=8, help="extra tokens: replays exact up to this depth")
    p.add_argument("--final-hidden", action="store_true", help="also store the final (post-norm) state")
    p.add_argument("--device", default=None)
    p.add_argument("--device-map", default=None, help="passed to from_pretrained, e.g. auto")
    p.add_argument("--dtype", default=None)
    p.set_defaults(fn=cmd_record)

    p = sub.add_parser("report", help="execute the notebooks and render HTML reports")
    p.add_argument("--out", default="reports")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--notebook", action="append", default=[], help="only these notebooks")
    p.set_defaults(fn=cmd_report)

    from eagle_nb.cli.engine import add_parser as add_engine_parser
    add_engine_parser(sub)

    p = sub.add_parser("doctor", help="diagnose a drafter (and what the engine reported) against "
                                      "the fault catalogue; exit 0 when healthy, 1 otherwise")
    p.add_argument("--drafter", required=True, help="drafter checkpoint directory (any format)")
    p.add_argument("--target", default=None, help="target checkpoint directory (default: shipped)")
    p.add_argument("--depth", type=int, default=None, help="draft depth k (default: the log's, else 4)")
    p.add_argument("--prompts", default=None, help="JSON lines with a 'prompt' field (default: shipped)")
    p.add_argument("--n-prompts", type=int, default=None, help="(default: all at T=0, else 8)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="(default: 64 at T=0, else 32)")
    p.add_argument("--temperature", type=float, default=0.0)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--observed", metavar="LOGFILE", help="a vLLM or SGLang log")
    g.add_argument("--observed-url", metavar="URL", help="a vLLM/SGLang server (reads /metrics)")
    g.add_argument("--observed-tau", type=float, metavar="X", help="the engine's mean acceptance length")
    p.add_argument("--observed-per-position", metavar="A,B,...", help="with --observed-tau: vLLM "
                   "per-position acceptance rates")
    t = p.add_mutually_exclusive_group()
    t.add_argument("--train-log", metavar="FILE", help="the drafter's training log (SpecForge, "
                   "SafeAILab EAGLE or speculators): do the files reproduce its per-step accuracy?")
    t.add_argument("--train-acc", metavar="A,B,...", help="training's per-step accuracy acc_1,acc_2,...")
    p.add_argument("--static-only", action="store_true", help="skip the reference-loop measurements")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_doctor)

    for each in sub.choices.values():
        each.add_argument("-v", "--verbose", action="store_true")
    document(ap)
    a = ap.parse_args(argv)
    if not a.verbose:
        quiet()
    try:
        sys.exit(a.fn(a))
    except (ValueError, OSError) as e:   # the package's errors name the fault and fix
        print(f"eagle-nb {a.cmd}: error: {e}", file=sys.stderr)
        sys.exit(2)
