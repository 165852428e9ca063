"""`eagle-nb` (or `python -m eagle_nb`): capture | inspect | convert | speculate | report | doctor.

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
    from .checkpoints import convert
    out = convert(a.src, a.dst, a.to, target=a.target)
    print(f"wrote {a.to} checkpoint to {out}")
    return 0


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
    return 0


def cmd_report(a) -> int:
    from .report import build_reports
    params = dict(p.split("=", 1) for p in a.param)
    index = build_reports(a.out, params=params, notebooks=a.notebook or None)
    print(f"reports written; open {index}")
    return 0


def cmd_doctor(a) -> int:
    from .doctor import doctor
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
               observed_per_position=per, dynamic=not a.static_only, progress=not a.json)
    print(d.to_json() if a.json else d.text())
    return 0 if d.healthy else 1


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="eagle-nb", description=__doc__.splitlines()[0])
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
    p.add_argument("--max-new-tokens", type=int, default=64)
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

    p = sub.add_parser("doctor", help="diagnose a drafter (and what the engine reported) against "
                                      "the fault catalogue; exit 0 when healthy, 1 otherwise")
    p.add_argument("--drafter", required=True, help="drafter checkpoint directory (any format)")
    p.add_argument("--target", default=None, help="target checkpoint directory (default: shipped)")
    p.add_argument("--depth", type=int, default=None, help="draft depth k (default: the log's, else 4)")
    p.add_argument("--prompts", default=None, help="JSON lines with a 'prompt' field (default: shipped)")
    p.add_argument("--n-prompts", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--observed", metavar="LOGFILE", help="a vLLM or SGLang log")
    g.add_argument("--observed-url", metavar="URL", help="a vLLM/SGLang server (reads /metrics)")
    g.add_argument("--observed-tau", type=float, metavar="X", help="the engine's mean acceptance length")
    p.add_argument("--observed-per-position", metavar="A,B,...", help="with --observed-tau: vLLM "
                   "per-position acceptance rates")
    p.add_argument("--static-only", action="store_true", help="skip the reference-loop measurements")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_doctor)

    a = ap.parse_args(argv)
    try:
        sys.exit(a.fn(a))
    except (ValueError, FileNotFoundError) as e:
        print(f"eagle-nb {a.cmd}: error: {e}", file=sys.stderr)
        sys.exit(2)
