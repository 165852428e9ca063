"""`eagle-nb engine compare | log`: the same prompts through the kit's reference loop and a real
engine of the registry (vLLM, llama.cpp), and acceptance over time from any registered engine's
log (vLLM, SGLang, llama-server). Parses flags, calls `eagle_nb.engines`, prints a table or JSON.
The engines offered are the registry's (`engines/registry.py`)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from eagle_nb.cli import options


def add_parser(sub):
    """Register `engine compare` and `engine log` on the top-level subparsers."""
    from eagle_nb.engines.registry import ENGINES, names
    runs = names(runs_here=True)
    ran = ", ".join(e.label for e in ENGINES if e.runs_here)
    eng = options.command(
        sub, "engine", help=f"compare with a real engine ({ran}), read engine logs",
        description=f"compare the kit's reference loop with a real engine ({ran}), read engine logs",
        examples="""\
            eagle-nb engine compare --depth 4 --max-new-tokens 64
            eagle-nb engine compare --url http://localhost:8000 --ablate fc-bypass
            eagle-nb engine log vllm.log --json""")
    esub = eng.add_subparsers(dest="engine_cmd", required=True)
    p = options.command(
        esub, "compare", help=f"same prompts through the reference loop and an engine ({ran})",
        description=f"the same prompts through the kit's reference loop and an engine ({ran}; launched\n"
                    "here, or a running server with --url), metric by metric, with a verdict",
        examples="""\
            eagle-nb engine compare --depth 4
            eagle-nb engine compare --engine llama.cpp --depth 4
            eagle-nb engine compare --engine-drafter /tmp/broken --ablate fc-bypass --json""")
    p.add_argument("--engine", default=runs[0], choices=runs,
                   help="engine launched here, in its entry's dtype (llama.cpp: llama-server from "
                        "`make engine`, or $EAGLE_NB_LLAMA_SERVER; HF directories are converted to GGUF)")
    options.target(p)
    options.drafter(p)
    p.add_argument("--engine-drafter", default=None,
                   help="serve this drafter in the engine instead (e.g. a broken copy; a .gguf "
                        "file with --engine llama.cpp)")
    p.add_argument("--prompts", default=None,
                   help="JSON lines file with a 'prompt' field per line (default: the shipped "
                        "evaluation prompts)")
    p.add_argument("--n-prompts", type=int, default=None,
                   help="without --prompts: the first N shipped prompts (default: all)")
    options.depth(p)
    options.max_new_tokens(p, 64)
    options.temperature(p)
    options.seed(p)
    options.ablate(p, "switch on a named fault in the reference loop only: the kit's prediction "
                      "for a fault the engine's drafter has")
    p.add_argument("--broken", default=None, metavar="FAULT",
                   help="serve a copy of the drafter with this fault written the engine's way, and switch "
                        "the same fault on in the reference loop (the engine's broken-drafter writer)")
    p.add_argument("--url", default=None, help="a running OpenAI-compatible server (not launched here)")
    methods = {m: r for e in ENGINES for m, r in e.draft_methods.items()}
    p.add_argument("--draft-sample-method", default=None, choices=list(methods),
                   help="how the engine drafts at T > 0, given to a server launched here; the reference "
                        "loop verifies with the matching rule: " + ", ".join(f"{m} = {r}" for m, r in methods.items())
                        + " (default: the engine's own default)")
    p.add_argument("--concurrency", type=int, default=None,
                   help="requests in flight at once (default: all prompts, up to 16)")
    options.json_output(p)
    p = options.command(
        esub, "log", help="acceptance over time from an engine's log file ("
                          + ", ".join(e.label for e in ENGINES if e.log_mark) + ")",
        description="acceptance over time from an engine's log file ("
                    + ", ".join(e.label for e in ENGINES if e.log_mark) + "); exit 1 when it holds\n"
                    "no acceptance lines",
        examples="""\
            eagle-nb engine log vllm.log
            eagle-nb engine log sglang.log --num-draft-tokens 5 --json""")
    p.add_argument("file", help="the engine's log file")
    p.add_argument("--num-draft-tokens", type=int, default=None,
                   help="SGLang --speculative-num-draft-tokens, to pin its accept-rate formula")
    options.json_output(p)
    return eng


def run(a) -> int:
    return {"compare": compare, "log": log}[a.engine_cmd](a)


def compare(a) -> int:
    from eagle_nb.engines import EngineError
    from eagle_nb.engines import compare as run_compare
    from eagle_nb.io.prompts import read_prompts
    prompts = read_prompts(a.prompts) if a.prompts else None
    try:
        res = run_compare(a.target, a.drafter, prompts, depth=a.depth, max_new_tokens=a.max_new_tokens,
                          temperature=a.temperature, seed=a.seed, ablations=a.ablate, url=a.url,
                          engine_drafter=a.engine_drafter, n_prompts=a.n_prompts, engine=a.engine,
                          broken=a.broken, draft_sample_method=a.draft_sample_method,
                          concurrency=a.concurrency)
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
        if "per_step_identical" in ag:
            print(f"accepted counts identical step by step on {ag['per_step_identical']} of "
                  f"{len(ag['per_request_tau_engine'])} requests (the engine's per-request metrics)")
        for w in res.warnings:
            print(f"warning: {w}")
        print(res.verdict)
    return 0 if res.verdict_kind in ("match", "unknown") else 1


def log(a) -> int:
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
