"""What a decode may use: the target's context length, checked input ids, and prompts that fit.

A prompt longer than the target's `max_position_embeddings` runs without error in HF and yields
nonsense (RoPE positions the model never saw), and an unbounded `max_new_tokens` sizes the
drafter cache (and the decode) without limit. Here both are refused before anything decodes:
prompt + max_new_tokens + depth must fit the context, or the prompt is truncated from the left
with a warning when the caller asks for it explicitly. Knows nothing about drafters or tokenizers.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterator

import torch


class ContextError(ValueError):
    """A prompt (plus what is to be generated) does not fit the target's context."""


class PromptTruncatedWarning(UserWarning):
    pass


def text_config(model):
    cfg = model.config
    return cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg


def context_length(model) -> int | None:
    """The target's `max_position_embeddings` (text config), or None when it declares none."""
    v = getattr(text_config(model), "max_position_embeddings", None)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def as_input_ids(ids, vocab_size: int | None = None) -> torch.Tensor:
    """Input ids as a (1, T) int64 tensor, T >= 1. Accepts a (T,) or (1, T) integer tensor or a
    list/tuple of ints; refuses generators, bare ints, strings, float tensors, empty prompts and
    ids outside [0, vocab_size) (which would index past the embedding)."""
    if isinstance(ids, Iterator) or isinstance(ids, (int, str, bytes, float)):
        raise TypeError(f"input_ids must be a (1, T) integer tensor or a list of ints, got "
                        f"{type(ids).__name__}; e.g. torch.tensor([[1, 2, 3]]) or "
                        f"tokenizer(text, return_tensors='pt')['input_ids']")
    if isinstance(ids, (list, tuple)):
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise TypeError("input_ids given as a list must hold ints only (one prompt, no batch)")
        ids = torch.tensor([list(ids)], dtype=torch.long)
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"input_ids must be a (1, T) integer tensor, got {type(ids).__name__}")
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"input_ids must hold integer token ids, got dtype {ids.dtype}")
    if ids.dim() == 1:
        ids = ids[None]
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"input_ids must be (1, T) (one prompt at a time), got shape {tuple(ids.shape)}")
    if ids.shape[1] == 0:
        raise ValueError("empty prompt: input_ids has 0 tokens; give at least one token")
    if vocab_size is not None:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= vocab_size:
            raise ValueError(f"input_ids hold id {lo if lo < 0 else hi}, outside the target "
                             f"vocabulary 0..{vocab_size - 1}")
    return ids.long()


def check_fits(prompt_len: int, max_new_tokens: int, depth: int, context: int | None,
               where: str = "the prompt") -> None:
    """Raise ContextError unless prompt + max_new_tokens (+ depth speculative positions) fits."""
    if context is None:
        return
    need = prompt_len + max_new_tokens + depth
    if need <= context:
        return
    room = context - prompt_len - depth
    if max_new_tokens + depth >= context:
        raise ContextError(
            f"max_new_tokens {max_new_tokens} (--max-new-tokens) with depth {depth} does not fit the "
            f"target's context (max_position_embeddings is {context}) even for a one-token prompt; "
            + (f"for {where} ({prompt_len} tokens) lower it to at most {room}" if room >= 1 else
               f"lower it, and shorten {where} ({prompt_len} tokens)"))
    fix = f"lower --max-new-tokens to {room}" if room >= 1 else "shorten it"
    raise ContextError(
        f"{where} is {prompt_len} tokens; with max_new_tokens {max_new_tokens} and depth {depth} it "
        f"needs {need} positions, but the target's max_position_embeddings is {context} (past it "
        f"the target's output is nonsense). Nothing was decoded: {fix}, or pass --truncate-prompt "
        f"(truncate_prompt=True) to keep only its last tokens")


def fit_prompt(ids: torch.Tensor, model, max_new_tokens: int, depth: int = 0,
               truncate: bool = False, where: str = "the prompt") -> torch.Tensor:
    """`ids` (1, T) checked against the target's context; with `truncate`, cut from the left so
    that max_new_tokens + depth still fit, with a PromptTruncatedWarning."""
    ctx = context_length(model)
    if not truncate or ctx is None:
        check_fits(ids.shape[1], max_new_tokens, depth, ctx, where)
        return ids
    keep = ctx - max_new_tokens - depth
    if keep < 1:
        check_fits(1, max_new_tokens, depth, ctx, f"even one token of {where}")
    if ids.shape[1] > keep:
        warnings.warn(f"{where} truncated from {ids.shape[1]} to its last {keep} tokens to fit the "
                      f"target's context {ctx} (max_new_tokens {max_new_tokens}, depth {depth})",
                      PromptTruncatedWarning, stacklevel=2)
        ids = ids[:, -keep:]
    return ids


class ContextWarning(UserWarning):
    """Hidden states were captured at positions past the target's context."""


class ChatTemplateError(ValueError):
    """A chat prompt for a tokenizer without a chat template (a base model)."""


def render_chat(tokenizer, chat, generation_prompt: bool = True, where: str = "the prompt") -> str:
    """`chat` (io.prompts.Chat) as the text a chat endpoint sends: the tokenizer's own chat template,
    with the assistant's generation prefix unless `generation_prompt` is False."""
    if not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        raise ChatTemplateError(
            f"{where} is a chat ({len(chat.messages)} turn(s)) but the tokenizer of {name} has no chat "
            f"template (a base model?); eagle_nb does not invent one: send raw text instead "
            f"({{\"prompt\": ...}} lines, --prompt), or use a tokenizer that carries a template")
    return tokenizer.apply_chat_template(chat.as_dicts(), add_generation_prompt=generation_prompt,
                                         tokenize=False)


def encode(tokenizer, text, where: str = "the prompt") -> torch.Tensor:
    """`text` (raw text, or an io.prompts.Chat rendered with the chat template) as (1, T) input
    ids with T >= 1: a text the tokenizer maps to no token is refused naming it (a model forward
    of 0 tokens fails deep inside the model). A rendered chat already holds its special tokens, so
    the tokenizer adds none (as vLLM's chat endpoint does)."""
    if hasattr(text, "messages"):
        rendered = render_chat(tokenizer, text, where=where)
        ids = tokenizer(rendered, return_tensors="pt", add_special_tokens=False)["input_ids"]
        text = rendered
    else:
        ids = tokenizer(text, return_tensors="pt")["input_ids"]
    if ids.shape[-1] == 0:
        raise ValueError(f"{where} {text[:40]!r} encodes to 0 tokens with this target's tokenizer; "
                         f"give text it tokenizes")
    return ids


def context_guard(model):
    """`guard(module, args, kwargs)`, called from a decoder layer's hooks: warns once, with
    ContextWarning, when the positions the layer runs at pass `max_position_embeddings`; None
    when the target declares no context."""
    ctx, warned = (context_length(model) if hasattr(model, "config") else None), []
    if ctx is None:
        return None

    def hook(module, args, kwargs):
        pos = kwargs.get("position_ids")
        pos = kwargs.get("cache_position") if pos is None else pos
        hs = args[0] if args else kwargs.get("hidden_states")
        end = int(pos.max()) + 1 if pos is not None and pos.numel() else \
            hs.shape[1] if hs is not None and hs.dim() == 3 else 0
        if end > ctx and not warned:
            warned.append(end)
            warnings.warn(f"capture: the input reaches position {end - 1}, past the target's "
                          f"max_position_embeddings {ctx}: states there come from RoPE positions "
                          f"the target never saw (its predictions degrade); keep inputs within "
                          f"{ctx} tokens", ContextWarning, stacklevel=2)
    return hook
