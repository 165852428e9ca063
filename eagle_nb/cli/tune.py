"""`eagle-nb tune`: which draft length pays at each batch size, from a speculation profile and the
step costs (draft step and verify step per batch size: given as two numbers or a JSON / CSV file,
or measured here on the local pair). Prints expected throughput and speedup per draft length, the
break-even acceptance, the best k and its vLLM / SGLang flags; `--plot` draws them. Parses and
checks flags before anything imports torch, calls `profiles.tune` (the model: docs/profile.md), prints.
"""
from __future__ import annotations

import json
import sys

from eagle_nb.cli import options


def add_parser(sub):
    p = options.command(
        sub, "tune", help="the draft length that pays at each batch size, from a profile",
        description="expected throughput per draft length and the best draft length per batch size,\n"
                    "from a speculation profile and the draft / verify step costs",
        examples="""\
            eagle-nb tune /tmp/drafter/speculation_profile.json --t-draft 0.595 --t-verify 1
            eagle-nb tune profile.json --costs h100_costs.csv --plot /tmp/tune.png
            eagle-nb tune profile.json --measure --batch-sizes 1,8 --save-costs /tmp/costs.json""")
    p.add_argument("profile", help="speculation_profile.json (eagle-nb profile, or any producer of "
                                   "Model-Optimizer's schema), or its directory")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--t-draft", type=float, metavar="TIME",
                   help="one drafter step (with --t-verify; any time unit, the same for both)")
    g.add_argument("--costs", metavar="FILE",
                   help="step costs per batch size: JSON {'costs': [{'batch_size', 't_draft', "
                        "'t_verify'}]} or CSV batch_size,t_draft,t_verify[,k] (docs/profile.md)")
    g.add_argument("--measure", action="store_true",
                   help="measure the step costs here on the local pair (--target, --drafter) at "
                        "each of --batch-sizes")
    p.add_argument("--t-verify", type=float, metavar="TIME",
                   help="one target verify step, taken as the same for every k and as the "
                        "target-only decode step (with --t-draft)")
    p.add_argument("--batch-size", type=int, default=1,
                   help="the batch size --t-draft and --t-verify were measured at")
    p.add_argument("--unit", default="s", help="time unit of --t-draft and --t-verify, for the table")
    p.add_argument("--batch-sizes", default="1,8",
                   help="with --measure: comma-separated batch sizes to measure")
    p.add_argument("--reps", type=int, default=10, help="with --measure: timed repetitions (medians)")
    options.target(p)
    options.drafter(p)
    options.device(p)
    p.add_argument("--save-costs", metavar="FILE", default=None,
                   help="with --measure: also write the measured costs as JSON (for --costs)")
    p.add_argument("--k-max", type=int, default=None,
                   help="longest draft length to consider (default and limit: the profile's "
                        "num_speculative_tokens)")
    p.add_argument("--plot", metavar="PNG", default=None,
                   help="write the speedup against draft length, one line per batch size, as a PNG")
    options.json_output(p)
    return p


def check(a) -> list[int]:
    """Every flag checked before torch is imported; returns the batch sizes to measure."""
    if a.t_verify is not None and (a.costs or a.measure):
        raise ValueError("--t-verify goes with --t-draft, not with --costs or --measure")
    if (a.t_draft is None) != (a.t_verify is None):
        raise ValueError("--t-draft and --t-verify go together: give both (or --costs, or --measure)")
    if a.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {a.batch_size}")
    if not a.measure and (a.save_costs or a.target or a.drafter):
        raise ValueError("--save-costs, --target and --drafter apply to --measure")
    if a.k_max is not None and a.k_max < 1:
        raise ValueError(f"--k-max must be >= 1, got {a.k_max}")
    if a.reps < 1:
        raise ValueError(f"--reps must be >= 1, got {a.reps}")
    try:
        sizes = [int(x) for x in a.batch_sizes.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--batch-sizes: expected comma-separated integers, got {a.batch_sizes!r}") \
            from None
    if not sizes or min(sizes) < 1:
        raise ValueError(f"--batch-sizes: expected positive integers, got {a.batch_sizes!r}")
    return sizes


def run(a) -> int:
    sizes = check(a)
    from eagle_nb.profiles.profile_json import consistency_note, read_profile
    from eagle_nb.engines.knobs import draft_flags, flags_line
    from eagle_nb.profiles.tune import report_lines, tune
    profile = read_profile(a.profile)
    note = consistency_note(profile)
    if note:
        print(f"note: {note}", file=sys.stderr)
    ks = list(range(1, (a.k_max or profile.num_speculative_tokens) + 1))
    costs = step_costs(a, sizes, ks)
    t = tune(profile.marginal_accept_rates, costs, ks, profile.measurement_conditions.get("batch_size"))
    if a.plot:
        from eagle_nb.views.palette import figure_to_png
        from eagle_nb.views.tune_plot import plot_tune
        with open(a.plot, "wb") as f:
            f.write(figure_to_png(plot_tune(t)))
        print(f"wrote {a.plot}", file=sys.stderr)
    if a.json:
        print(json.dumps({**t.as_dict(draft_flags), "costs": [c.as_dict() for c in costs]}, indent=2))
    else:
        for c in costs:
            print(f"costs at batch {c.batch_size} ({c.source}): t_draft {c.t_draft:.4g}, t_verify "
                  + ", ".join(f"k={k}: {v:.4g}" for k, v in c.t_verify.items()) + f" {c.unit}")
        print("\n".join(report_lines(t, flags_line)))
    return 0


def step_costs(a, sizes: list[int], ks: list[int]):
    """The costs the flags give: two numbers, a file, or measured on the local pair."""
    from eagle_nb.io.step_costs import costs_from_numbers, read_step_costs, write_step_costs
    if a.t_draft is not None:
        return [costs_from_numbers(a.t_draft, a.t_verify, a.batch_size, a.unit)]
    if a.costs:
        return read_step_costs(a.costs)
    from eagle_nb.experiment.pair import Pair
    from eagle_nb.profiles.batch_costs import measure_step_costs
    pair = Pair(a.target, a.drafter, device=a.device)
    ids = pair.encode(pair.prompts(1)[0])
    costs = measure_step_costs(pair, ids, sizes, ks, reps=a.reps)
    if a.save_costs:
        write_step_costs(costs, a.save_costs)
        print(f"wrote {a.save_costs}", file=sys.stderr)
    return costs
