"""The serving-condition registry: every condition under which a drafter whose files are right
still loses (or seems to gain) acceptance, one `Condition` entry each (condition_entry.py),
switched on deliberately like a fault (`Setting(conditions=(name,))`, `eagle-nb speculate
--condition NAME`). An entry carries every fact about its condition and every consumer reads it
from here: story, public reference and fix; how the pair is run under it (`apply`, from
condition_fns.py) and the wiring fields that changes; the function that measures it; the doctor's
signature; the check a user runs on their own pair. The CLI lists the names from here, the doctor
measures and ranks the entries it is asked for or a prompt file points at (doctor/measure.py,
doctor/workload.py, doctor/hypotheses.py), and the catalogue has a row per entry
(doctor/catalogue.py). Conditions are applied after the faults, in
registry order; no module is mutated.

How to add one: a transformation in condition_fns.py, one `Condition(...)` row of `REGISTRY`, a
section of docs/conditions.md; tests/conditions/test_registry.py applies every entry and checks it
changes only `changes`.
"""
from __future__ import annotations

from contextlib import contextmanager

from eagle_nb.conditions import condition_fns as fn
from eagle_nb.conditions.condition_entry import (CONTEXT, PRECISION, TEMPLATE, VOCABULARY, WORKLOAD,
                                                 Condition, ConditionError)  # noqa: F401 - re-exported

TEMPLATE_FIX = "serve requests the way the drafter's training data were rendered (same endpoint, same template state)"
CHECK = "eagle-nb speculate --target T --drafter D --prompts P --condition {name}"
TEMPLATE_SIG = ("tau and every per-position rate move together against the pair as served in "
                "training; static checks pass")
QUANT_FIX = ("serve the target at the precision the drafter's training states were computed at, or "
             "train (or fine-tune) the drafter on the quantized target's states")
QUANT_SIG = ("tau at or a little below the full-precision pair's, the per-position rates with it; "
             "static checks pass; the captured states' cosine to full precision below 1 "
             "(compare_precision)")


def quantized(name: str, scheme: str, what: str) -> Condition:
    return Condition(
        name, PRECISION,
        f"the target is served {what} while the drafter was trained on its full-precision states, "
        "so the aux states it is handed and the tokens it must predict move",
        "Avarok-Cybersecurity/atlas PR #218 (an NVFP4 target accepted 4.55 of 15 drafts against "
        "5.35 with FP8)", QUANT_FIX, fn.quantized(scheme), "target",
        f"conditions.precision.compare_precision(pair, prompts, {scheme!r})", QUANT_SIG,
        CHECK.format(name=name))


REGISTRY: tuple[Condition, ...] = (
    Condition("template-raw", TEMPLATE,
              "a drafter trained on templated chats is served the user's text alone (a "
              "completions endpoint, a generate API), so it sees a token stream it never saw",
              "lightseekorg/tokenspeed #1305; sgl-project/sglang PR #6985 (Llama-4 EAGLE-3 poor on "
              "the generate API, fine on the chat API)", TEMPLATE_FIX, fn.template("raw"),
              "template", "conditions.templates.encode_mode(tokenizer, prompt, 'raw')", TEMPLATE_SIG,
              CHECK.format(name="template-raw")),
    Condition("template-no-generation-prompt", TEMPLATE,
              "the chat template is applied without the assistant's generation prefix, so the "
              "drafter starts from a position its training never started from",
              "lightseekorg/tokenspeed #1305 (appending the assistant suffix to the same raw prompt "
              "moved a Kimi-K3 EAGLE-3 from 3.87 to 2.08 accepted tokens per step)", TEMPLATE_FIX,
              fn.template("no-generation-prompt"), "template",
              "conditions.templates.encode_mode(tokenizer, prompt, 'no-generation-prompt')",
              TEMPLATE_SIG, CHECK.format(name="template-no-generation-prompt")),
    Condition("template-system-prompt", TEMPLATE,
              "requests carry a system prompt the training chats did not have (or lack one they "
              "had), so the template's state differs from training",
              "z-lab/dflash #133 (thinking mode off: 25% to 60% acceptance)", TEMPLATE_FIX,
              fn.template("system-added"), "template",
              "conditions.templates.encode_mode(tokenizer, prompt, 'system-added')", TEMPLATE_SIG,
              CHECK.format(name="template-system-prompt")),
    Condition("chat-template-mismatch", TEMPLATE,
              "prompts are served in a chat template the drafter never saw in training (trained on "
              "raw text, served between ChatML markers), so its features and tokens are out of "
              "distribution", "docs/formats.md (d2t/t2d and the training targets come from the "
              "training data's formatted assistant tokens)",
              "train (or regenerate data) with the serving chat template", fn.template("chatml"),
              "template", "conditions.templates.encode_mode(tokenizer, prompt, 'chatml')",
              TEMPLATE_SIG, CHECK.format(name="chat-template-mismatch")),
    Condition("context-past-training", CONTEXT,
              "requests are far longer than the drafter's training samples, so it drafts at RoPE "
              "positions it never saw",
              "vllm-project/speculators PR #684 (a Qwen3-8B EAGLE-3 fell from tau 2.30 at 2k tokens "
              "of context to 1.08 at 20k); sgl-project/sglang #6783",
              "train the drafter on samples as long as the served requests (and with the target's "
              "RoPE scaling)", fn.past_training, "prompt_format",
              "conditions.context_curve.context_curve(pair); "
              "conditions.context_limits.check_context(drafter_cfg, target_cfg)",
              "tau falls with prompt length (context_curve); at short prompts the pair is healthy",
              CHECK.format(name="context-past-training")),
    quantized("target-quantized", "int4", "with int4 weights (RTN, groups of 32)"),
    quantized("target-quantized-int8", "int8", "with int8 weights (RTN, per output channel)"),
    quantized("target-quantized-q4_1", "q4_1", "from a llama.cpp Q4_1 file (its dequantized weights)"),
    Condition("loop-inflated-workload", WORKLOAD,
              "the benchmark's output repeats itself (a repeated filler prompt, a degenerate loop), "
              "and repeated text is easy for any drafter: tau rises without the drafter being better",
              "lightseekorg/tokenspeed #1305 (a raw completion looping over two tokens showed 3.93 "
              "tokens per step against 1.94 on chat output); jundot/omlx PR #2343",
              "measure on natural, non-repeating workloads; report tau on loop-free steps "
              "(RunResult.loop_report)", fn.looped, "prompt_format",
              "conditions.repetition.loop_report(stats, n)",
              "a high loop share, and tau over loop-free steps apart from tau over all steps "
              "(RunResult.loop_report); where the output loops, tau overall rises above the pair's "
              "on natural text", CHECK.format(name="loop-inflated-workload")),
    Condition("vocabulary-coverage", VOCABULARY,
              "the draft vocabulary misses tokens the workload needs (a frequency-built vocabulary "
              "of another language or domain), so those tokens can never be drafted",
              "MiaAI-Lab PR #43 (a frequency-built draft vocabulary broke Spanish output)",
              "build the draft vocabulary from data like the served workload (or a larger one)",
              fn.half_vocabulary, "drafter",
              "conditions.workload.prompt_coverage(pair, prompts)",
              "every position accepts less; the tokens outside the draft vocabulary are never "
              "accepted (prompt_coverage's ceiling falls)",
              "eagle-nb inspect D --prompts P --target T (coverage), then " +
              CHECK.format(name="vocabulary-coverage")),
)


# -- lookups (rebuilt by `registered`) ----------------------------------------------------------------
def _index(registry: tuple[Condition, ...]) -> None:
    names = [c.name for c in registry]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"condition names must be unique: {dup}")
    globals().update(REGISTRY=registry, CONDITIONS=registry,
                     BY_NAME={c.name: c for c in registry},
                     ORDER={c.name: i for i, c in enumerate(registry)})


CONDITIONS = BY_NAME = ORDER = None          # derived tables: set here
_index(REGISTRY)


@contextmanager
def registered(*conditions: Condition):
    """Add entries to the registry (at the end) for the duration of a `with` block."""
    old = REGISTRY
    _index(old + tuple(conditions))
    try:
        yield
    finally:
        _index(old)


def names() -> tuple[str, ...]:
    return tuple(BY_NAME)


def entry(name: str) -> Condition:
    """The registry entry `name`; an unknown name is an error naming the known ones."""
    if name not in BY_NAME:
        raise KeyError(f"unknown condition {name!r}; known: {list(BY_NAME)}")
    return BY_NAME[name]


def check(names) -> tuple[str, ...]:
    """Validated condition names in registry order; unknown or repeated names fail, and two that
    change the same wiring field (two templates, two precisions) cannot be combined."""
    names = tuple(names or ())
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown conditions {unknown}; known: {list(BY_NAME)}")
    if len(set(names)) != len(names):
        raise ValueError(f"condition listed twice in {list(names)}")
    seen: dict = {}
    for n in names:
        for f in BY_NAME[n].fields_changed:
            if f in seen:
                raise ValueError(f"conditions {seen[f]!r} and {n!r} both set the {f!r} of the "
                                 "wiring: run them one at a time")
            seen[f] = n
    return tuple(sorted(names, key=ORDER.__getitem__))


def apply(wiring, names, builds):
    """The wiring with the named conditions applied in registry order, each noted with its story."""
    for name in check(names):
        wiring = BY_NAME[name].apply(wiring, builds).but(note=f"condition {name}: {BY_NAME[name].story}")
    return wiring
