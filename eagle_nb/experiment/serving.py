"""The serving-path facts of registry entries (faults.py, field `serving`): what goes wrong between
files that pass every check and the engine that serves them, with the check to run on the
serving side.

When the drafter's files pass and the engine still reports near-zero acceptance, the fault is in
what the engine does with the files: (1) the target hands over one final hidden state instead of
the aux states, so `fc` is skipped by the engine's width check (a multimodal wrapper whose class
does not pass its language model's aux states on is the usual cause); (2) `d2t` is applied as
target ids instead of offsets; (3) the drafter embeds with a table it was not trained with (the
engine did not hand it the target's, or replaced its own); (4) `d2t` is ignored. Which of these
can happen depends on facts of the files (`fault_entry.Facts`); `flow` is that order. Knows the
architecture table; nothing about measuring.
"""
from __future__ import annotations

from eagle_nb.experiment.fault_entry import Facts, Serving
from eagle_nb.model.architectures import serving_notes
from eagle_nb.model.fault_names import EMBED_RANDOM


def aux_story(f: Facts) -> str:
    who = (f"the target is a multimodal wrapper ({f.arch_name}): unless the engine's class passes its "
           "language model's aux states on" if f.wrapper else
           "the engine's target class does not hand over the aux states")
    return (f"{who}, the drafter is handed one {f.Ht}-wide final hidden state instead of {f.n_aux} x "
            f"{f.Ht}, and since Ht == H the engine's width check skips fc without an error")


def aux_check(f: Facts) -> str:
    notes = serving_notes(f.arch, f.needs, f.engine)
    return ("; ".join(notes) + f"; on a running SGLang server, print "
            "`forward_batch.spec_info.hidden_states.shape[-1]` in `llama_eagle3.py` just before its "
            f"`if hidden_states.shape[-1] != embeds.shape[-1]` line: {f.n_aux * f.Ht} when the aux "
            f"states arrive, {f.Ht} when fc is skipped")


def embed_check(f: Facts) -> str:
    if f.has_embed:
        return ("vLLM before PR #28549 replaced a loaded draft embedding with the target's, SGLang "
                "uses the target's: serve with an engine that keeps the drafter's own")
    cls = f" for {f.arch_name}" if f.arch_name else ""
    extra = [n for n in (f.arch.engines if f.arch else ()) if "get_embed_and_head" in n]
    return ("SGLang hands the target's embedding to the drafter through the target class's "
            f"`get_embed_and_head`{cls}" + (f" ({extra[0]})" if extra else "") + "; in the running "
            "engine the draft model's `embed_tokens.weight` must equal the target's input embedding")


WRAPPER = Serving(1, "the wrapper's engine class does not pass its language model's aux states on, "
                     "so the drafter gets one final state and fc is skipped",
                  lambda f: f.wrapper and f.Ht == f.H, aux_story, aux_check)
FC_BYPASS = Serving(2, "the engine's target class does not hand over the aux states, so the drafter "
                       "gets one final state and fc is skipped",
                    lambda f: not f.wrapper and f.Ht == f.H, aux_story, aux_check)
D2T_ABSOLUTE = Serving(
    3, "the engine applies d2t as target ids, not offsets", lambda f: f.Vd < f.V,
    lambda f: "the engine (or the converter feeding it) applies d2t as target ids instead of offsets, "
              "so draft id i becomes target id d2t[i]",
    lambda f: "compare the engine's draft-to-target map with your file: SGLang builds "
              f"`hot_token_id = d2t + arange({f.Vd})` when it loads the draft (`llama_eagle3.py`), "
              "vLLM keeps `draft_id_to_target_id`; for a few draft ids i the engine's target id must "
              "be i + d2t[i]")
EMBED_NOT_SHARED = Serving(
    4, "the engine does not give the drafter the target's embedding it was trained with",
    lambda f: not f.has_embed,
    lambda f: "the drafter ships no embed_tokens, so the engine must hand it the target's; an engine "
              "whose target class does not (or hands another table) leaves the drafter embedding "
              "with a table it was not trained with",
    embed_check, signature_of=EMBED_RANDOM)
EMBED_FORCED = Serving(
    5, "the engine replaces the drafter's own embedding with the target's", lambda f: f.has_embed,
    lambda f: "the engine replaces the drafter's own trained embed_tokens with the target's",
    embed_check, signature_of=EMBED_RANDOM)
D2T_IDENTITY = Serving(
    6, "the engine ignores d2t", lambda f: f.Vd < f.V,
    lambda f: "the engine ignores d2t and takes draft id i as target id i",
    lambda f: "vLLM loads d2t as `draft_id_to_target_id` from PR #18909 (before it the identity was "
              "used); SGLang reads it as `hot_token_id`: check the serving release loads it")
