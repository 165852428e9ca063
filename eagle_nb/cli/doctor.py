"""`eagle-nb doctor`: diagnose a drafter (and what an engine reported) against the fault catalogue:
static checks of the checkpoint, then the reference loop's prediction for every fault, ranked by
distance to the observation. Parses flags, calls `doctor.run.doctor` (a corridor of named phases),
prints the diagnosis; exit 0 when healthy, 1 otherwise."""
from __future__ import annotations

from eagle_nb.cli import options


def add_parser(sub):
    from eagle_nb.engines.registry import ENGINES
    labels = ", ".join(e.label for e in ENGINES if e.log_mark)
    readers = ", ".join(e.label for e in ENGINES if e.read_responses)
    p = options.command(
        sub, "doctor", help="diagnose a drafter (and what the engine reported)",
        description="diagnose a drafter checkpoint, and what a serving engine reported, against the\n"
                    "fault catalogue; exit 0 when healthy, 1 otherwise",
        examples="""\
            eagle-nb doctor --drafter data/drafter_eagle --static-only
            eagle-nb doctor --drafter /models/EAGLE3-drafter --target /models/target --observed vllm.log
            eagle-nb doctor --drafter D --target T --prompts my_requests.jsonl --observed-tau 1.9
            eagle-nb doctor --drafter data/drafter_eagle --observed-tau 1.3 --depth 4 --json""")
    p.add_argument("--drafter", required=True, help="EAGLE-3 drafter checkpoint directory, any format")
    options.target(p)
    p.add_argument("--depth", type=int, default=None,
                   help="draft depth k (default: the one the engine's log or metrics show, else 4)")
    p.add_argument("--prompts", default=None, metavar="FILE",
                   help="your requests, as sent: JSON lines, each a 'prompt' (raw text) or "
                        "'messages' (a chat), optionally 'language' / 'category'. Read as a "
                        "workload: template use, context lengths against both limits, coverage per "
                        "language and loop share are reported, and the conditions the requests "
                        "point at (a template A/B, context-past-training) are measured beside the "
                        "faults (default: the shipped evaluation prompts, no workload)")
    p.add_argument("--n-prompts", type=int, default=None, help="measure N prompts; from a --prompts "
                   "file of more requests, a seeded sample of N (default: all at T=0, measured by the "
                   "one pass; 8 at T > 0, the live loop; at most 64 of a --prompts file)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="new tokens generated per prompt (default: 64 at T=0, 32 at T > 0)")
    options.temperature(p)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--observed", metavar="FILE", action="append", help="an engine's log (" + labels +
                   "), or a JSON or JSON-lines file of " + readers + " responses with per-request "
                   "metrics (read as responses when it starts with '{' or '[' and parses as JSON); "
                   "repeat it for the same pair at other batch sizes: at T = 0 their tau must agree")
    g.add_argument("--observed-url", metavar="URL", help="an engine's server (reads /metrics)")
    g.add_argument("--observed-tau", type=float, metavar="X", help="the engine's mean acceptance length")
    p.add_argument("--observed-per-position", metavar="A,B,...",
                   help="with --observed-tau: vLLM per-position acceptance rates")
    t = p.add_mutually_exclusive_group()
    t.add_argument("--train-log", metavar="FILE", help="the drafter's training log (SpecForge, "
                   "SafeAILab EAGLE or speculators): do the files reproduce its per-step accuracy?")
    t.add_argument("--train-acc", metavar="A,B,...", help="training's per-step accuracy acc_1,acc_2,...")
    p.add_argument("--static-only", action="store_true", help="skip the reference-loop measurements")
    p.add_argument("--features", metavar="RECORDING", default=None, help="a recording of the target "
                   "(`eagle-nb record --layers all --final-hidden`, or `--engine vllm`): the pair and "
                   "every fault a recording can answer are measured from it, the target never loaded; "
                   "SpecForge / speculators training files (teacher-forced) give only the healthy tau")
    p.add_argument("--trust-remote-code", action="store_true", help="allow loading a target whose "
                   "config needs its own code (auto_map); off by default")
    options.condition(p, "also measure the pair under a named serving condition and rank it beside "
                         "the faults (needs the target to run; a recording holds one served run)")
    options.json_output(p)
    return p


def run(a) -> int:
    from eagle_nb.doctor.run import doctor
    from eagle_nb.experiment.faults import HEALTHY
    per = None
    if a.observed_per_position:
        try:
            per = [float(x) for x in a.observed_per_position.split(",") if x.strip()]
        except ValueError:
            raise SystemExit(f"--observed-per-position: expected comma-separated numbers, got "
                             f"{a.observed_per_position!r}")
    d = doctor(a.drafter, a.target, depth=a.depth, prompts=a.prompts, n_prompts=a.n_prompts,
               max_new_tokens=a.max_new_tokens, temperature=a.temperature,
               observed_log=a.observed if a.observed and len(a.observed) > 1 else (a.observed or [None])[0],
               observed_url=a.observed_url, observed_tau=a.observed_tau,
               observed_per_position=per, dynamic=not a.static_only, progress=not a.json,
               features=a.features, trust_remote_code=a.trust_remote_code,
               train_log=a.train_log, train_acc=a.train_acc, conditions=tuple(a.condition))
    print(d.to_json() if a.json else d.text())
    return 0 if d.verdict.cause == HEALTHY else 1
