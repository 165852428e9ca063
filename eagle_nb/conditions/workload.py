"""A workload's target tokens and what they say about the drafter's vocabulary: the target's
greedy continuations of a prompt file (or a recording's continuation tokens), grouped by the
prompt file's labels, measured by `conditions.coverage` (docs/conditions.md, "Vocabulary coverage").

Prompts are encoded and fitted as the loop encodes them (`model.limits`): a prompt that does not fit
the target's context is refused naming it. Continuations are decoded greedily for
`max_new_tokens` tokens, EOS not stopping them (as the one pass decodes, loop/target_states.py).
Knows the target, its tokenizer and recordings; nothing about drafter weights beyond d2t/t2d.
"""
from __future__ import annotations

import torch

from eagle_nb.conditions.coverage import Coverage, coverage, draft_vocab_mask
from eagle_nb.loop.target_states import greedy_continuations
from eagle_nb.model.limits import encode, fit_prompt

GROUP_FIELDS = ("language", "category", "domain")   # prompt-file fields coverage is grouped by


def split_rows(rows) -> tuple[list, list[dict]]:
    """(prompts, labels) from `io.prompts.read_prompt_rows` rows (or plain prompts: no labels);
    labels keep the GROUP_FIELDS a row has."""
    prompts, labels = [], []
    for r in rows:
        if isinstance(r, dict):
            prompts.append(r["prompt"])
            labels.append({f: r[f] for f in GROUP_FIELDS if f in r})
        else:
            prompts.append(r)
            labels.append({})
    return prompts, labels


@torch.no_grad()
def workload_continuations(target, tokenizer, prompts, max_new_tokens: int = 64,
                           batch_size: int = 16) -> list[list[int]]:
    """The target's greedy continuation (max_new_tokens ids, prompt excluded) of each prompt (raw
    text or `Chat`, encoded as the loop encodes it)."""
    dev = next(target.parameters()).device
    ids = [fit_prompt(encode(tokenizer, p, where=f"prompt {i}").to(dev), target, max_new_tokens,
                      where=f"prompt {i}") for i, p in enumerate(prompts)]
    seqs = greedy_continuations(target, ids, max_new_tokens, batch_size)
    return [s[x.shape[-1]:].tolist() for s, x in zip(seqs, ids)]


def recording_continuations(recording) -> list[list[int]]:
    """Each record's tokens after its prompt (the greedy continuation, or a teacher-forced
    recording's dataset answer)."""
    return [r.input_ids.reshape(-1)[r.prompt_len:].tolist() for r in recording]


def drafter_mask(drafter_or_state, vocab_size: int | None = None) -> torch.Tensor:
    """The draft-vocabulary mask of a loaded `Eagle3Drafter` or a checkpoint's state dict
    (`inspect_checkpoint`'s), with the target vocabulary size (taken from the drafter's config)."""
    if hasattr(drafter_or_state, "config"):
        d = drafter_or_state
        return draft_vocab_mask(d.config.vocab_size, getattr(d, "d2t", None), getattr(d, "t2d", None))
    if vocab_size is None:
        raise ValueError("a state dict needs vocab_size (the drafter config's vocab_size)")
    st = drafter_or_state
    return draft_vocab_mask(vocab_size, st.get("d2t"), st.get("t2d"))


def prompt_coverage(inside: torch.Tensor, target, tokenizer, rows, max_new_tokens: int = 64,
                    depth: int = 4) -> Coverage:
    """Coverage of the target's greedy continuations of `rows` (prompt-file rows or prompts),
    grouped by their language/category/domain labels."""
    prompts, labels = split_rows(rows)
    return coverage(workload_continuations(target, tokenizer, prompts, max_new_tokens),
                    inside, depth, labels)


def recording_coverage(inside: torch.Tensor, recording, depth: int = 4) -> Coverage:
    """Coverage of a recording's continuation tokens (no labels: a recording keeps none)."""
    return coverage(recording_continuations(recording), inside, depth)
