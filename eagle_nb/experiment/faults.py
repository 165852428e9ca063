"""The fault registry: every known EAGLE-3 fault from real debugging stories, one `Fault` entry
each (fault_entry.py), switched on deliberately (never by default). An entry carries every fact
about its fault and every consumer reads it from here: story, public reference and fix; how it is
switched (`apply`, a pure `Wiring -> Wiring` from fault_fns.py) and the `Wiring` fields that
changes; which static check of the doctor sees it and what a pass rules out; its severity; its
doctor probe; how it happens on the serving path to files that pass (serving.py); how a broken
checkpoint is written for an engine; a crash's error text and log pattern; whether notebook 03's
panel shows, toggles or shifts to it. Colour: the views palette, by registry position. `FAULTS`
are the switchable entries in application order; no module is mutated.

How to add a fault, with a worked example: docs/architecture-faults.md (its name in
model/fault_names.py, the only place a fault's name is a string; a transformation in fault_fns.py;
one `Fault(...)` row of `REGISTRY` where it must be applied; then tests/experiment/test_faults.py,
which applies every entry and checks it changes only `changes`).
"""
from __future__ import annotations

from contextlib import contextmanager

from eagle_nb.checkpoints.broken import d2t_as_absolute, random_embedding, shift_aux_ids
from eagle_nb.experiment import fault_fns as fn
from eagle_nb.experiment import serving as S
from eagle_nb.experiment.fault_entry import (CRASH, NO_STATIC_TRACE, SERVING, STATIC, SWITCH, Crash,
                                             Fault, Probe, Static)
from eagle_nb.experiment.wiring import Builds, NeedsTarget, NotApplicable, Wiring  # noqa: F401 - re-exported
from eagle_nb.model import fault_names as N

HEALTHY = "healthy"
FLAGS_WARN = "warn: flag set, not honoured everywhere"
AUX_WARN = "warn, when the engines' conventions disagree"
LAYER_FIX = "write the ids in the convention the engine reads (docs/layers.md)"

REGISTRY: tuple[Fault, ...] = (   # switches in application order, then crash- and static-only
    Fault(N.LAYERS0_KEYS_DROPPED, SWITCH,
          "a speculators checkpoint (`layers.0.*`) loaded by a `midlayer.*` engine-style "
          "non-strict loader (SGLang <= 0.5.11; 0.5.12+ loads `layers.0.*`): the decoder layer "
          "stays random", "docs/formats.md (format C keys; how the engines load them)",
          "load with a strict key map (`eagle-nb convert`): `layers.0.*` <-> `midlayer.*`",
          Static(("keys",), "fail: `layers.0.*` under a `midlayer.*` config", formats=("speculators",)),
          apply=fn.engine_drafter, changes="drafter, d2t", severity=40, panel=True, toggle=True),
    Fault(N.EMBED_RANDOM, SWITCH,
          "the exported checkpoint carries a random (untrained) embed_tokens; vLLM uses it, "
          "SGLang replaces it with the target's", "docs/faults.md (lightseekorg/TorchSpec #38)",
          "drop embed_tokens from the checkpoint (engines then take the target's)",
          Static(("embed-tokens",), "warn: own embedding unrelated to the target's", rules_out=True),
          apply=fn.embed_random, changes="drafter", checkpoint=random_embedding, severity=45),
    Fault(N.EMBED_TARGET_FORCED, SWITCH,
          "the engine overwrites the drafter's own trained embed_tokens with the target's",
          "docs/faults.md (vllm PR #27732/#27737 -> #28549)",
          "use an engine that shares the target embedding only when the draft has none "
          "(vLLM >= PR #28549)",
          Static(("embed-tokens",), "warn: the drafter has its own embedding"),
          apply=fn.embed_target, changes="drafter", serving=S.EMBED_FORCED,
          probe=Probe("the target's embedding fits better than the drafter's own", N.EMBED_RANDOM)),
    Fault(N.LM_HEAD_MISSING, SWITCH,
          "the checkpoint has no lm_head; the engine leaves it at random init without a message",
          "docs/faults.md (sglang PR #27908, #27829)",
          "ship the trained lm_head (or the target head's rows selected by t2d)",
          Static(("lm-head", "keys"), "fail", rules_out=True),
          apply=fn.lm_head_random, changes="drafter", severity=50),
    Fault(N.NORM_BEFORE_FC_DROPPED, SWITCH,
          "the config's norm_before_fc is not propagated, so the input RMSNorm before fc is skipped",
          "docs/faults.md (vllm PR #38111)",
          "serve with an engine that honours norm_before_fc (vLLM >= PR #38111)",
          Static(("config-flags",), FLAGS_WARN),
          apply=fn.flag("norm_before_fc", False), changes="drafter"),
    Fault(N.NORM_BEFORE_FC_FORCED, SWITCH,
          "an RMSNorm the drafter was never trained with is applied before fc (flag set by a "
          "converter that OR-s variant flags)",
          "docs/drafter.md (speculators converter OR-s norm_before_fc)",
          "set norm_before_fc to what the trainer used", NO_STATIC_TRACE,
          apply=fn.flag("norm_before_fc", True), changes="drafter"),
    Fault(N.NORM_OUTPUT_DROPPED, SWITCH,
          "the drafter was trained to feed the post-norm state back (norm_output) but the engine "
          "feeds the pre-norm state", "docs/faults.md (speculators PR #610 -> vllm PR #46488)",
          "serve with an engine that honours norm_output", Static(("config-flags",), FLAGS_WARN),
          apply=fn.flag("norm_output", False), changes="drafter"),
    Fault(N.NORM_OUTPUT_FORCED, SWITCH,
          "the engine feeds the post-norm state back across draft steps while training fed the "
          "pre-norm state (SpecForge's norm_output means something else)",
          "docs/drafter.md (SpecForge norm_output vs vLLM/SGLang)",
          "drop norm_output from the serving config", NO_STATIC_TRACE,
          apply=fn.flag("norm_output", True), changes="drafter"),
    Fault(N.NORM_BEFORE_RESIDUAL_FORCED, SWITCH,
          "vLLM's speculators adapter fills a missing norm_before_residual with True, so the "
          "residual carries hidden_norm(g) instead of g",
          "docs/drafter.md (vLLM algos.py update_eagle3 default True)",
          "write norm_before_residual: false explicitly in the speculators config",
          Static(("config-flags",), "warn: field absent from a speculators config", rules_out=True),
          apply=fn.flag("norm_before_residual", True), changes="drafter"),
    Fault(N.OUTPUT_NORM_RESIDUAL, SWITCH,
          "the draft layer's output misses its residual (an output norm returning hidden instead "
          "of hidden + residual)", "docs/faults.md (vllm PR #14464, #11672)",
          "upgrade the engine (the fused output norm must return hidden + residual)",
          NO_STATIC_TRACE, apply=fn.residual_bug, changes="drafter"),
    Fault(N.ROPE_THETA_WRONG, SWITCH,
          "the draft config's RoPE theta is not the one the drafter was trained with (e.g. copied "
          "from a Llama-3 target: 500000 instead of 10000)",
          "docs/drafter.md (use the draft config's RoPE base, not the target's)",
          "restore the drafter's training rope_theta / rope_scaling in its config",
          Static(("rope",), "warn, when the draft's RoPE differs from the target's"),
          apply=fn.rope_wrong, changes="drafter"),
    Fault(N.FP16_FC_OVERFLOW, SWITCH,
          "fc runs in float16: fused aux states (massive activations in large targets) overflow "
          "65504 and become inf", "docs/formats.md (engines cast draft weights to their dtype)",
          "serve the drafter in bf16 (or fp32)",
          Static(("dtype", "dtype-range"), "measured max |activation| in fc vs the fp16 range"),
          apply=fn.fp16_fc, changes="drafter", severity=100),
    Fault(N.D2T_ABSOLUTE, SWITCH,
          "d2t offsets used as absolute target ids (equivalently: 'fixed' by subtracting "
          "arange), so draft id i becomes target id d2t[i]", "docs/formats.md (verl-SpeCo PR #67)",
          "store d2t as offsets: target id = i + d2t[i]", Static(("d2t",), "fail"),
          apply=fn.d2t_absolute, changes="d2t", severity=60, checkpoint=d2t_as_absolute,
          panel=True, toggle=True, serving=S.D2T_ABSOLUTE),
    Fault(N.D2T_IDENTITY, SWITCH,
          "the loader does not recognise d2t, so draft id i is taken as target id i",
          "docs/faults.md (vllm PR #18909)",
          "upgrade the engine so draft_id_to_target_id is loaded (vLLM PR #18909)",
          Static(("d2t",), "warn: all-zero d2t with Vd < V", note="an engine ignoring d2t: none"),
          apply=fn.d2t_identity, changes="d2t", severity=80, serving=S.D2T_IDENTITY),
    Fault(N.D2T_SIDE_FILE, SWITCH,
          "d2t/t2d were saved in a side file, not in the weights, so the engine uses the identity",
          "docs/faults.md (NVIDIA-NeMo/Automodel PR #2447)", "put d2t and t2d inside the weights file",
          Static(("d2t",), "fail: the side file is named", rules_out=True),
          apply=fn.d2t_identity, changes="d2t", severity=70),
    Fault(N.WRAPPER_CAPTURE, SWITCH,
          "the target is a multimodal wrapper; capture code that looks for `model.layers` "
          "finds nothing and the final hidden state is handed over",
          "docs/faults.md (sglang PR #13904: VL wrapper lost aux states)",
          "serve with an engine whose class for this architecture passes the aux states",
          Static(("target-layout",), "warn", rules_out=True),
          apply=fn.wrapper, changes="target, features, fc_policy", panel=True, toggle=True,
          serving=S.WRAPPER),
    Fault(N.FC_BYPASS, SWITCH,
          "the target hands over its single final (post-norm) hidden state instead of the three "
          "aux layers; the engine's width check then skips fc (SGLang PR #13904)",
          "docs/drafter.md (sglang PR #13904)",
          "make the target hand over its aux hidden states (engine/model support for EAGLE-3 "
          "capture)", NO_STATIC_TRACE,
          apply=fn.final_hidden, changes="features, fc_policy", severity=90, panel=True, toggle=True,
          serving=S.FC_BYPASS),
    Fault(N.LAYER_IDS_PLUS_1, SWITCH,
          "aux layer ids shifted one boundary later (output-of-layer ids read as HF ids)",
          "docs/layers.md (sglang PR #25454, vllm PR #43671)", LAYER_FIX, Static(("aux-ids",), AUX_WARN),
          apply=fn.shift(1), changes="layer_ids", checkpoint=shift_aux_ids(1), panel=True,
          layer_shift=1,
          probe=Probe("your ids look off by one (one boundary too early)", N.LAYER_IDS_MINUS_1)),
    Fault(N.LAYER_IDS_MINUS_1, SWITCH,
          "aux layer ids shifted one boundary earlier (HF ids read as output-of-layer ids)",
          "docs/layers.md (vllm PR #43671)", LAYER_FIX, Static(("aux-ids",), AUX_WARN),
          apply=fn.shift(-1), changes="layer_ids", checkpoint=shift_aux_ids(-1), panel=True,
          layer_shift=-1,
          probe=Probe("your ids look off by one (one boundary too late)", N.LAYER_IDS_PLUS_1)),
    Fault(N.LAYER_IDS_HEURISTIC, SWITCH,
          "a converter ignores the config's ids and falls back to the EAGLE default {2, L//2, L-3}",
          "docs/faults.md (ggml-org/llama.cpp PR #27040)",
          "carry the config's aux ids through the converter", Static(("aux-ids",), "warn"),
          apply=fn.heuristic_ids, changes="layer_ids",
          probe=Probe("the EAGLE default ids fit better than the config's", N.LAYER_IDS_HEURISTIC)),
    # crash-only: texts come from the engines' own messages as reported (docs/faults.md)
    Fault(N.FC_WIDTH_MISMATCH, CRASH,
          "the target hands over a different number of aux states than the drafter's fc was "
          "trained on (ids shifted past the last layer, the final boundary not captured, "
          "N-1 states), so fc's matmul fails",
          "docs/faults.md: sglang PR #32334 (#32226), 8640 vs 5760 width; docs/faults.md: vllm PR #46973",
          "capture exactly the drafter's aux ids (final boundary pre-norm); fc input = n_aux x Ht",
          Static(("fc-width", "aux-ids"), "fail", rules_out=True), severity=20,
          crash=Crash("vLLM / SGLang", r"mat1 and mat2 shapes cannot be multiplied "
                      r"\((\d+)x(\d+) and (\d+)x(\d+)\)", fn.fc_width_text)),
    Fault(N.NO_EAGLE3_INTERFACE, CRASH,
          "the target class does not implement SupportsEagle3 (no aux-state capture)",
          "docs/faults.md: vllm #25134, #25927 -> PR #26485; PR #36658; PR #31257",
          "upgrade vLLM to a version whose model class supports EAGLE3 for this architecture",
          NO_STATIC_TRACE,
          crash=Crash("vLLM", r"Model does not support EAGLE3 interface but aux_hidden_state_outputs "
                      r"was requested", fn.fixed_text("Model does not support EAGLE3 interface but "
                                                      "aux_hidden_state_outputs was requested"))),
    Fault(N.NO_CAPTURE_HOOKS, CRASH,
          "the target model class has no `set_eagle3_layers_to_capture` / capture flag",
          "docs/faults.md: sglang PR #9216 (#8434), PR #12319, PR #19689, PR #23569",
          "upgrade SGLang to a version whose model class captures aux states for this architecture",
          NO_STATIC_TRACE, crash=Crash("SGLang", r"object has no attribute 'capture_aux_hidden_states'",
                                       fn.no_capture_text)),
    Fault(N.DRAFT_NUM_LAYERS, CRASH,
          "the draft config says num_hidden_layers != 1 (often copied from the target)",
          "docs/faults.md: SpecForge #129",
          "set num_hidden_layers to 1 in the draft config (the drafter has one decoder layer)",
          Static(("config-flags",), "fail", rules_out=True), severity=30,
          crash=Crash("SGLang", r"EAGLE3 currently only supports 1 layer",
                      fn.fixed_text("EAGLE3 currently only supports 1 layer"))),
    Fault(N.DRAFT_VOCAB_SHORT, CRASH,
          "fewer distinct training tokens than draft_vocab_size, so d2t/t2d are shorter than "
          "the configured draft vocabulary", "docs/faults.md: SpecForge PR #76",
          "pad the draft vocabulary with zero-frequency ids (or lower draft_vocab_size)",
          Static(("d2t",), "fail: shape"),
          crash=Crash("SpecForge", r"The size of tensor a \((\d+)\) must match the size of tensor b "
                      r"\((\d+)\)", fn.vocab_short_text)),
    # static-only: properties of the files that the doctor's checks name
    Fault(N.VOCAB_MISMATCH, STATIC,
          "the drafter was trained for another target: its vocabulary (or embedding shape) is not "
          "the target's", "docs/faults.md (pair a drafter with the target it was trained on)",
          "pair the drafter with the target (and tokenizer) it was trained on",
          Static(("vocab", "embed-tokens"), "fail", rules_out=True), severity=10),
    Fault(N.ARCHITECTURE_NAME, STATIC,
          "an EAGLE-format config whose architectures is not ['LlamaForCausalLMEagle3']: SGLang "
          "loads the wrong class for this name and vLLM needs method 'eagle3'", "docs/faults.md",
          "set architectures to ['LlamaForCausalLMEagle3'] for SGLang (docs/faults.md)",
          Static(("format",), "warn")),
    # serving-only: an engine's doing, measured by another entry's signature
    Fault(N.EMBED_NOT_SHARED, SERVING,
          "the engine does not hand a drafter without its own embed_tokens the target's embedding "
          "(or hands another table), so it embeds with a table it was not trained with",
          "docs/faults.md (sglang PR #19689: Kimi-K2.5's get_embed_and_head; signature of "
          "embed-random, TorchSpec #38)",
          "serve with an engine whose target class hands the drafter the target's input embedding",
          NO_STATIC_TRACE, serving=S.EMBED_NOT_SHARED),
)


# -- lookups (rebuilt by `registered`) ----------------------------------------------------------------
def _index(registry: tuple[Fault, ...]) -> None:
    names = [f.name for f in registry]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup or HEALTHY in names:
        raise ValueError(f"fault names must be unique and not {HEALTHY!r}: {dup or [HEALTHY]}")
    if set(N.NAMES) - set(names):       # a name of model/fault_names.py without an entry
        raise ValueError(f"fault names without an entry: {sorted(set(N.NAMES) - set(names))}")
    globals().update(
        REGISTRY=registry, FAULTS=tuple(f for f in registry if f.kind == SWITCH),  # application order
        BY_NAME={f.name: f for f in registry}, ORDER={f.name: i for i, f in enumerate(registry)},
        STORIES={f.name: f.story for f in registry},
        PANEL=tuple(f.name for f in registry if f.panel),         # notebook 03 precomputes these
        TOGGLES=tuple(f.name for f in registry if f.toggle),      # the live panel's checkboxes
        SHIFTS={0: None, **{f.layer_shift: f.name for f in registry if f.layer_shift}})


FAULTS = BY_NAME = ORDER = STORIES = PANEL = TOGGLES = SHIFTS = None    # derived tables: set here
_index(REGISTRY)


@contextmanager
def registered(*faults: Fault):
    """Add entries to the registry for the duration of a `with` block (switches after the last
    switch, so in application order last; others at the end). For tests and experiments."""
    old = REGISTRY
    n = max((i + 1 for i, f in enumerate(old) if f.kind == SWITCH), default=0)
    _index(old[:n] + tuple(f for f in faults if f.kind == SWITCH) + old[n:]
           + tuple(f for f in faults if f.kind != SWITCH))
    try:
        yield
    finally:
        _index(old)


def entry(name: str) -> Fault:
    """The registry entry `name`; an unknown name is an error naming the known ones."""
    if name not in BY_NAME:
        raise KeyError(f"unknown fault {name!r}; known: {list(BY_NAME)}")
    return BY_NAME[name]


def of_kind(kind: str) -> tuple[Fault, ...]:
    """The entries of one kind (SWITCH, CRASH, STATIC, SERVING), in registry order."""
    return tuple(f for f in REGISTRY if f.kind == kind)


def severity_key(name: str) -> tuple:
    """Sort key for faults named by failing checks: by severity, unranked ones last."""
    return (entry(name).severity is None, entry(name).severity or 0)


def check(names) -> tuple[str, ...]:
    """Validated switch names in application (registry) order; unknown or repeated names fail."""
    names = tuple(names or ())
    unknown = [n for n in names if n not in {f.name for f in FAULTS}]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {[f.name for f in FAULTS]}")
    if len(set(names)) != len(names):
        raise ValueError(f"fault listed twice in {list(names)}")
    return tuple(sorted(names, key=ORDER.__getitem__))


def ablations_for(faults=(), layer_shift: int = 0) -> tuple[str, ...]:
    """The fault names for a set of toggled faults and a captured-layer-id shift, in order."""
    if layer_shift not in SHIFTS:
        raise ValueError(f"layer_shift must be one of {sorted(SHIFTS)}, got {layer_shift}")
    return check(tuple(faults) + ((SHIFTS[layer_shift],) if SHIFTS[layer_shift] else ()))


def label(names) -> str:
    return " + ".join(names) if names else HEALTHY      # a setting's faults, as one label


def apply(wiring: Wiring, names, builds: Builds) -> Wiring:
    """The wiring with the named faults applied in registry order, each noted with its story."""
    for name in check(names):
        wiring = BY_NAME[name].apply(wiring, builds).but(note=f"{name}: {BY_NAME[name].story}")
    return wiring
