"""`eagle-nb engine compare | log`: argparse wiring for the engine commands (cli.py adds them).

Thin: parses flags, calls `eagle_nb.engines`, prints a table or JSON.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def cmd_compare(a) -> int:
    from eagle_nb.engines import EngineError, compare
    from eagle_nb.io.prompts import read_prompts
    prompts = read_prompts(a.prompts) if a.prompts else None
    try:
        res = compare(a.target, a.drafter, prompts, depth=a.depth, max_new_tokens=a.max_new_tokens,
                      temperature=a.temperature, seed=a.seed, ablations=a.ablate, url=a.url,
                      engine_drafter=a.engine_drafter, n_prompts=a.n_prompts, engine=a.engine)
    except EngineError as e:
        print(f"eagle-nb engine compare: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(res.to_json(), indent=2))
    else:
        print(res.table().to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        ag = res.agreement
        if ag.get("available"):
            print(f"outputs token-identical on {ag['identical']} of {ag['prompts']} prompts")
        for w in res.warnings:
            print(f"warning: {w}")
        print(res.verdict)
    return 0 if res.verdict_kind in ("match", "unknown") else 1


def cmd_log(a) -> int:
    from eagle_nb.engines.logs import parse_log
    path = Path(a.file)
    if not path.is_file():
        print(f"eagle-nb engine log: error: {path}: no such file", file=sys.stderr)
        return 2
    parsed = parse_log(path.read_text(errors="replace"), num_draft_tokens=a.num_draft_tokens)
    if a.json:
        print(json.dumps(parsed.to_json(), indent=2, default=str))
    else:
        cols = ["line_no", "time", "engine", "accept_length", "draft_acceptance_rate", "accept_rate"]
        print(parsed.df[cols].to_string(index=False) if len(parsed.df) else "no acceptance lines found")
        print(json.dumps(parsed.summary, indent=2, default=str))
    return 0 if len(parsed.df) else 1


def add_parser(sub) -> None:
    """Register `engine compare` and `engine log` on the top-level subparsers."""
    eng = sub.add_parser("engine", help="compare with a real engine (vLLM, llama.cpp), read engine logs")
    esub = eng.add_subparsers(dest="engine_cmd", required=True)
    p = esub.add_parser("compare", help="same prompts through the reference loop and an engine")
    p.add_argument("--engine", default="vllm", choices=["vllm", "llama.cpp"],
                   help="engine launched here (llama.cpp: llama-server from `make engine`, or "
                        "$EAGLE_NB_LLAMA_SERVER; HF directories are converted to GGUF)")
    p.add_argument("--target", default=None, help="HF target dir (default: the shipped target)")
    p.add_argument("--drafter", default=None, help="drafter dir (default: the shipped drafter)")
    p.add_argument("--engine-drafter", default=None,
                   help="serve this drafter in the engine instead (e.g. a broken copy; a .gguf "
                        "file with --engine llama.cpp)")
    p.add_argument("--prompts", default=None, help="JSON lines with a 'prompt' field (default: shipped)")
    p.add_argument("--n-prompts", type=int, default=None)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ablate", action="append", default=[], metavar="NAME",
                   help="reference-side named ablation: the kit's prediction for a fault")
    p.add_argument("--url", default=None, help="a running OpenAI-compatible server (not launched here)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_compare)
    p = esub.add_parser("log", help="acceptance over time from a vLLM, SGLang or llama-server log file")
    p.add_argument("file")
    p.add_argument("--num-draft-tokens", type=int, default=None,
                   help="SGLang --speculative-num-draft-tokens, to pin its accept-rate formula")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_log)
