"""How the pair is run under each condition of the registry (registry.py): transformations
`(wiring, builds) -> wiring`, pure like the faults' (experiment/fault_fns.py).

A transformation returns `w.but(...)` with the fields it changes (the entry's `changes`) and never
mutates a module: a quantized target is a deep copy, a drafter with a smaller draft vocabulary is
`drafter.variant(...)` sharing every weight. Costly objects come from `builds.get` (memoised once
per pair). One that cannot run on this pair raises `ConditionError` saying why.

`wiring` and `builds` are experiment/wiring.py's `Wiring` and `Builds`, used through their methods
only (experiment sits below this subpackage and imports it). Imports torch only when a condition
is applied (the registry, and with it the CLI's check of condition names, loads without it).
"""
from __future__ import annotations

from eagle_nb.conditions.condition_entry import ConditionError

CONTEXT_SHARE = 0.75     # context-past-training: the prompt fills this share of the target's context
LOOP_REPEATS = 4         # loop-inflated-workload: the prompt's text, this many times


def template(mode: str):
    """The request rendered in template mode `mode` (templates.py). A mode the tokenizer cannot
    render (one that needs its template, on a tokenizer without one) is refused here, before any
    prompt is run."""
    def apply(w, b):
        from eagle_nb.conditions.templates import AS_TEXT, TEMPLATE_MODES
        tok = getattr(b, "tokenizer", None)
        if mode not in TEMPLATE_MODES:
            raise ConditionError(f"unknown template mode {mode!r}; choose from {list(TEMPLATE_MODES)}")
        if mode not in AS_TEXT and tok is not None and not getattr(tok, "chat_template", None):
            raise ConditionError(f"template mode {mode!r} renders the tokenizer's chat template, and "
                                 "this tokenizer has none (a base or code model): serve it raw, or "
                                 "give a target whose tokenizer carries a template")
        return w.but(template=mode, note=f"requests rendered in template mode {mode!r}")
    return apply


def quantized(scheme: str):
    """The target replaced by a copy quantized with `scheme` (quantize.py: int8, int4, q4_1)."""
    def apply(w, b):
        model, info = quantized_target(b, scheme)
        return w.but(target=model, note=f"target quantized: {info.describe()}")
    apply.scheme = scheme           # what compare_precision quantizes for this entry
    return apply


def loaded_target(b, why: str):
    """The pair's loaded target model; a pair without one (a recording) is refused with `why`."""
    from torch import nn
    if not isinstance(b.target, nn.Module):
        raise ConditionError(f"{why} needs the loaded target (a recording holds one served run)")
    return b.target


def quantized_target(b, scheme: str):
    """(model, QuantInfo): the pair's target quantized with `scheme`, built once per pair."""
    loaded_target(b, "a quantized target")
    from eagle_nb.conditions.quantize import quantize
    return b.get(("target-quantized", scheme), lambda: quantize(b.target, scheme))


def context_prefix(n_tokens: int, tokenizer) -> str:
    """Text of about `n_tokens` tokens cut from the long documents (long_documents.py: the standard
    library's source), ending at a line break, to put before a prompt."""
    from eagle_nb.conditions.long_documents import long_documents
    doc = long_documents(1, min_chars=6 * n_tokens + 2000, kind="source")[0]
    ids = tokenizer(doc, add_special_tokens=False)["input_ids"][:n_tokens]
    text = tokenizer.decode(ids)
    return text[:text.rfind("\n") + 1] or text


def past_training(w, b):
    """Each prompt preceded by source text so that it fills CONTEXT_SHARE of the target's context:
    the drafter runs at positions far past those of short training samples."""
    from eagle_nb.model.limits import context_length
    ctx = context_length(loaded_target(b, "context-past-training"))
    tok = getattr(b, "tokenizer", None)
    if ctx is None or tok is None:
        raise ConditionError("context-past-training needs the target's tokenizer and a target that "
                             "declares max_position_embeddings")
    n = int(CONTEXT_SHARE * ctx)
    text = b.get(("context-prefix", n), lambda: context_prefix(n, tok))
    fmt = text.replace("{", "{{").replace("}", "}}") + "{prompt}"
    return w.but(prompt_format=fmt, note=f"each prompt preceded by {n} tokens of source text "
                                         f"({CONTEXT_SHARE:.0%} of the target's {ctx}-token context)")


def looped(w, b):
    """The prompt's text repeated LOOP_REPEATS times, as a benchmark's repeated filler prompt: the
    continuation tends to repeat too, and repeated text is easy for any drafter."""
    fmt = "\n\n".join(["{prompt}"] * LOOP_REPEATS)
    return w.but(prompt_format=fmt, note=f"each prompt's text repeated {LOOP_REPEATS} times")


def half_vocabulary(w, b):
    """The drafter able to propose only the lower half of its draft ids (by target id: a BPE
    vocabulary's earlier merges, the more frequent ones), as a frequency-built draft vocabulary of
    half the size would: every other target token can never be drafted."""
    d = w.drafter

    def build():
        from eagle_nb.conditions.vocab_mask import MaskedHead
        keep = d.config.draft_vocab_size // 2
        return d.variant(lm_head=MaskedHead(d.lm_head, keep))
    return w.but(drafter=b.get(("vocabulary-coverage", id(d)), build),
                 note=f"draft vocabulary cut to its first {d.config.draft_vocab_size // 2} ids")
