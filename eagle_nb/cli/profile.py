"""`eagle-nb profile`: a drafter's speculation profile (`speculation_profile.json`, Model-Optimizer's
schema: per-position acceptance as conditional and marginal rates, mean acceptance length, the
measurement conditions) measured on the pair, a recording, or read from an engine's output; and the
engines' synthetic-acceptance knobs from it (`--to vllm|sglang|trtllm`). Parses and checks flags
before anything imports torch, calls `experiment.profile_run` or the engine's registry entry
(`profile_from`), and `engines.knobs` for the settings, prints (docs/profile.md)."""
from __future__ import annotations

import json
import sys

from eagle_nb.cli import options
from eagle_nb.engines import knobs as K


def add_parser(sub):
    p = options.command(
        sub, "profile", help="a drafter's speculation profile and the engines' knobs",
        description="measure a drafter's speculation profile (speculation_profile.json, NVIDIA\n"
                    "Model-Optimizer's schema) on the pair, a recording or an engine's output,\n"
                    "and print the engines' synthetic-acceptance settings from it",
        examples="""\
            eagle-nb profile --prompts data/eval_prompts.jsonl --depth 4 --out /tmp/drafter
            eagle-nb profile --features /tmp/rec --depth 6 --out /tmp/p.json --to vllm
            eagle-nb profile --vllm-responses responses.jsonl --out /tmp/p.json
            eagle-nb profile --from /tmp/p.json --to sglang --num-speculative-tokens 3""")
    options.target(p)
    options.drafter(p)
    g = options.prompts(p, required=True)
    g.add_argument("--features", metavar="RECORDING",
                   help="measure on a recording (eagle-nb record) instead of the loaded target: "
                        "greedy only")
    g.add_argument("--vllm-responses", metavar="FILE",
                   help="vLLM completion responses (a JSON list, one object, or JSON lines) from a "
                        "server started with --per-request-spec-decode-metrics summary or detailed")
    g.add_argument("--llama-log", metavar="FILE",
                   help="a llama-server log written with LLAMA_TRACE=1 (its per-step 'accepted "
                        "N/M draft tokens' lines)")
    g.add_argument("--from", dest="source", metavar="PROFILE",
                   help="read an existing speculation_profile.json (any producer), strictly")
    options.depth(p)
    options.max_new_tokens(p, 128)
    options.temperature(p)
    options.seed(p)
    options.device(p)
    p.add_argument("--out", default=None,
                   help="write the profile here (a directory gets speculation_profile.json)")
    p.add_argument("--to", action="append", default=[], choices=K.names(), metavar="ENGINE",
                   help=f"also print that engine's synthetic-acceptance settings (repeatable): "
                        f"{', '.join(K.names())}")
    p.add_argument("--num-speculative-tokens", type=int, default=None,
                   help="draft length for --to (default: the profile's; never deeper)")
    options.json_output(p)
    return p


def check(a) -> None:
    """Every flag checked before a model is loaded or torch imported."""
    if a.depth < 1:
        raise ValueError(f"--depth must be >= 1, got {a.depth}")
    if a.max_new_tokens < 1:
        raise ValueError(f"--max-new-tokens must be >= 1, got {a.max_new_tokens}")
    if a.temperature < 0:
        raise ValueError(f"--temperature must be >= 0, got {a.temperature}")
    if a.features and a.temperature != 0:
        raise ValueError("--features answers greedy chains only: drop --temperature (sampling "
                         "needs the loaded target)")
    if a.num_speculative_tokens is not None and not a.to:
        raise ValueError("--num-speculative-tokens sets the draft length of --to ENGINE; give --to")
    if a.num_speculative_tokens is not None and a.num_speculative_tokens < 1:
        raise ValueError(f"--num-speculative-tokens must be >= 1, got {a.num_speculative_tokens}")
    if (a.source or a.vllm_responses or a.llama_log) and a.target:
        raise ValueError("--target names the pair to measure; the profile of --from, "
                         "--vllm-responses or --llama-log is already measured")


def run(a) -> int:
    check(a)
    profile = read_source(a)
    from eagle_nb.profiles.profile import report_lines, write_profile
    from eagle_nb.profiles.profile_json import consistency_note
    note = consistency_note(profile)
    if note:
        print(f"note: {note}", file=sys.stderr)
    if a.out:
        print(f"wrote {write_profile(profile, a.out)}", file=sys.stderr)
    knobs = engine_settings(profile, a)
    if a.json:
        out = profile.to_json()
        print(json.dumps({"profile": out, "engines": knobs} if knobs else out, indent=2))
        return 0
    print("\n".join(report_lines(profile)))
    for engine, s in knobs.items():
        print()
        print(K.render(engine, s))
    return 0


def read_source(a):
    """The profile of whichever source the flags name (pure readers first: no torch for them)."""
    from eagle_nb.engines import llama_cpp, vllm
    from eagle_nb.io.files import read_json_values
    if a.source:
        from eagle_nb.profiles.profile_json import read_profile
        return read_profile(a.source)
    if a.vllm_responses:
        return vllm.ENTRY.profile_from(read_json_values(a.vllm_responses, "vLLM responses file"),
                                       conditions={"responses_file": a.vllm_responses})
    if a.llama_log:
        from eagle_nb.io.files import PROMPTS_CAP, read_text
        text = read_text(a.llama_log, "llama-server log", PROMPTS_CAP)
        return llama_cpp.ENTRY.profile_from(text, conditions={"log": a.llama_log})
    return measure(a)


def measure(a):
    """The pair (or a recording) over the prompts: experiment.profile_run.measure_profile."""
    from eagle_nb.experiment.profile_run import measure_profile
    if a.features:
        from eagle_nb.experiment.recorded_pair import RecordedPair
        pair = RecordedPair(a.features, a.drafter, a.target, device=a.device)
        prompts, source = pair.prompts(), f"recording {a.features}"
    else:
        from eagle_nb.experiment.pair import Pair
        from eagle_nb.model.targets import pick_device, resolve_target
        pick_device(a.device)
        if a.target:
            resolve_target(a.target)
        prompts = options.prompt_list(a)
        source = a.prompts or ("--chat" if a.chat is not None else "--prompt")
        pair = Pair(a.target, a.drafter, device=a.device)
    return measure_profile(pair, prompts, a.depth, max_new_tokens=a.max_new_tokens,
                           temperature=a.temperature, seed=a.seed, prompts_source=source)


def engine_settings(profile, a) -> dict:
    """{engine: settings} for each --to (an engine whose config names the drafter, vLLM's, takes
    --drafter as its model when given)."""
    return {engine: K.settings(engine, profile, a.num_speculative_tokens, a.drafter) for engine in a.to}
