"""`eagle-nb speculate`: speculative decoding on the target (or a replay of a recording) with every
acceptance metric the engines print, healthy or with named faults (--ablate) or serving conditions
(--condition) switched on, and the measured speedup. Parses flags, calls `experiment.pair.run_prompts` (or, with --features, the recorded
pair), prints."""
from __future__ import annotations

import json
import sys

from eagle_nb.cli import options


def add_parser(sub):
    p = options.command(
        sub, "speculate", help="speculative decoding with acceptance metrics",
        description="speculative decoding with every acceptance metric, healthy, with named faults "
                    "or under named serving conditions",
        examples="""\
            eagle-nb speculate --prompts data/eval_prompts.jsonl --depth 4
            eagle-nb speculate --prompt 'def f(x):' --ablate fc-bypass --temperature 1
            eagle-nb speculate --prompt 'def f(x):' --condition target-quantized""")
    options.target(p)
    options.drafter(p)
    g = options.prompts(p)
    g.add_argument("--features", metavar="RECORDING",
                   help="replay against a recording (eagle-nb record, SpecForge or speculators "
                        "hidden-state files) instead of running the target; --target then only "
                        "supplies embed_tokens, read lazily; --ablate measures faults on it (faults "
                        "reading other layers need `record --layers all --final-hidden`)")
    options.depth(p)
    p.add_argument("--topk", type=int, default=1,
                   help="tree branching (SGLang --speculative-eagle-topk); 1 = chain")
    p.add_argument("--num-draft-tokens", type=int, default=None,
                   help="tree nodes verified per step, root included (SGLang "
                        "--speculative-num-draft-tokens); default: depth+1 for a chain, all "
                        "candidates for a tree")
    options.max_new_tokens(p, 32)     # as the notebooks
    options.temperature(p)
    from eagle_nb.model.config import VERIFY_RULES
    p.add_argument("--verify-rule", choices=VERIFY_RULES, default=None,
                   help="how drafts are verified at --temperature > 0 (chains): argmax = argmax "
                        "drafts, rejection against one-hot draft probabilities (vLLM's default "
                        "draft_sample_method=greedy); sampled = sampled drafts, standard rejection "
                        "sampling (vLLM probabilistic, SGLang >= PR #26312); strict = sampled "
                        "drafts accepted only when equal to the target's sample (docs/metrics.md). "
                        "At temperature 0 every rule is greedy verification (default: sampled)")
    options.seed(p)
    options.ablate(p, "switch on a named fault")
    options.condition(p, "run the pair under a named serving condition (a fault is in the files, "
                         "a condition in how they are served: the two flags combine)")
    p.add_argument("--truncate-prompt", action="store_true",
                   help="keep only a prompt's last tokens when it does not fit the target's context "
                        "(default: refuse it)")
    options.device(p)
    options.json_output(p)
    return p


def run(a) -> int:
    if a.features:
        return run_replay(a)
    from eagle_nb.experiment.setting import Setting
    # every flag is checked before torch loads, and so before a model is (the same checks the API
    # and notebooks use: Setting runs SpecConfig's checks, the fault names and SGLang's tree-shape
    # rules)
    Setting(faults=tuple(a.ablate), depth=a.depth, temperature=a.temperature,
            max_new_tokens=a.max_new_tokens, seed=a.seed, topk=a.topk,
            num_draft_tokens=a.num_draft_tokens, verify_rule=a.verify_rule,
            conditions=tuple(a.condition))
    from eagle_nb.experiment.pair import run_prompts
    from eagle_nb.model.targets import pick_device, resolve_target
    pick_device(a.device)
    if a.target:
        resolve_target(a.target)
    prompts = options.prompt_list(a)
    result = run_prompts(target=a.target, drafter=a.drafter, prompts=prompts, depth=a.depth,
                         topk=a.topk, num_draft_tokens=a.num_draft_tokens,
                         max_new_tokens=a.max_new_tokens, temperature=a.temperature, seed=a.seed,
                         faults=tuple(a.ablate), device=a.device, check_reference=True,
                         truncate_prompt=a.truncate_prompt, verify_rule=a.verify_rule,
                         conditions=tuple(a.condition))
    loops = result.loop_report()
    if a.json:
        print(json.dumps({**result.summary(), "workload": loops.as_dict()}, indent=2))
    else:
        print(result.report_text())
        print(*loops.report_lines(), sep="\n")
        print(speedup_line(result))
    return 0


def run_replay(a) -> int:
    """`speculate --features RECORDING`: greedy speculation computed from the recording, healthy or
    with --ablate faults, through the one door (`experiment.recorded_pair.RecordedPair`); a fault
    the recording cannot answer is refused with the reason. Teacher-forced training files give
    estimates, exact where --target's lm_head picks the dataset's tokens everywhere."""
    if a.condition:
        raise ValueError(f"--features replays one served run: --condition {' '.join(a.condition)} "
                         "changes what the target is fed or computes, so it needs the live target "
                         "(drop --features)")
    if a.temperature != 0 or a.topk != 1 or a.verify_rule:
        raise ValueError("--features replays greedy speculation only: drop --temperature/--topk/"
                         "--verify-rule (sampling and trees need the live target)")
    from eagle_nb.experiment.recorded_pair import RecordedPair
    from eagle_nb.experiment.setting import Setting
    s = Setting(faults=tuple(a.ablate), depth=a.depth, max_new_tokens=a.max_new_tokens, seed=a.seed)
    pair = RecordedPair(a.features, a.drafter, a.target, device=a.device, check_greedy=bool(a.target))
    if a.device in (None, "cpu"):
        print("drafter: run in float32 on the CPU (its checkpoint dtype is kept on an accelerator)",
              file=sys.stderr)
    why = pair.why_not(s)
    if why:
        raise ValueError(f"--ablate {' '.join(a.ablate)} on the recording {a.features}: {why}")
    res = pair.run(pair.prompts(), s, progress=False)
    print(json.dumps(res.summary(), indent=2) if a.json else res.report_text())
    return 0


def speedup_line(result) -> str:
    """Measured speedup over target-only greedy decoding of the same prompts on this machine."""
    spec, ref = result.tokens_per_s, result.reference_tokens_per_s
    if not spec or not ref:
        return ("speedup: not measured (the target-only reference is decoded only at temperature 0)")
    return (f"speedup: {spec / ref:.2f}x over target-only greedy decoding on this machine "
            f"({spec:.0f} vs {ref:.0f} tokens/s)")
