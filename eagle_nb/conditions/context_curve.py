"""tau against prompt length: the `context-past-training` curve (docs/conditions.md, "Context
length").

Prompts of 128 to 4,096 tokens are cut from long real documents (long_documents.py: the Python
standard library's documentation strings for a chat target, its source for a code target). A chat
target gets `Chat.user(document + INSTRUCTION)`, rendered with its template; a raw target gets the
document text. Each prompt is cut so that the ids the loop feeds (`limits.encode`) number the
requested length, or the nearest below it (decode/encode round trips can move a token: the actual
lengths are reported). At each length the pair runs its one pass (`Pair.run` at T = 0, depths
up to `depth` only). Lengths that do not fit the target's context with the new tokens are clipped,
named in `ContextCurve.clipped`, and replaced by one point at the longest prompt that fits. The curve carries the static check (context_limits.py)
and the drafter's declared and, when given, trained length, for a plot to mark.

Knows the Pair's attributes (target, drafter, tokenizer, one_pass, run); nothing about plots.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from eagle_nb.conditions.long_documents import long_documents, source_note
from eagle_nb.io.prompts import Chat
from eagle_nb.conditions.context_limits import ContextCheck, check_context
from eagle_nb.model.limits import context_length, encode

DEFAULT_LENGTHS = (128, 256, 512, 1024, 2048, 4096)
INSTRUCTION = "Summarize the documentation above in three sentences."


def _prompt(text: str, chat: bool):
    return Chat.user(f"{text}\n\n{INSTRUCTION}") if chat else text


def fit_document(tokenizer, doc: str, n_tokens: int, chat: bool) -> tuple[object, int]:
    """(prompt, its length in fed ids) cut from `doc` to `n_tokens` ids, or the nearest below."""
    ids = tokenizer(doc, add_special_tokens=False)["input_ids"]

    def length(m):
        return encode(tokenizer, _prompt(tokenizer.decode(ids[:m]), chat)).shape[-1]
    m = max(1, n_tokens - (length(1) - 1))              # the wrapper's overhead, measured once
    best = None
    for _ in range(8):
        if m > len(ids):
            raise ValueError(f"the document holds {len(ids)} tokens, fewer than {n_tokens}: "
                             "build longer documents (long_documents(min_chars=...))")
        n = length(m)
        if n <= n_tokens and (best is None or n > best[1]):
            best = (m, n)
        if n == n_tokens:
            break
        m = max(1, m + n_tokens - n)
    if best is None:
        raise ValueError(f"could not cut a prompt of at most {n_tokens} tokens")
    return _prompt(tokenizer.decode(ids[:best[0]]), chat), best[1]


def long_prompts(tokenizer, lengths=DEFAULT_LENGTHS, n_docs: int = 1, kind: str | None = None,
                 chat: bool | None = None) -> dict:
    """{requested length: [(prompt, fed ids), ...one per document]}. `chat` None: a chat prompt
    when the tokenizer has a chat template; `kind` None: docs for chat prompts, source otherwise."""
    chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat
    kind = kind or ("docs" if chat else "source")
    docs = long_documents(n_docs, min_chars=6 * max(lengths) + 2000, kind=kind)
    return {L: [fit_document(tokenizer, d, L, chat) for d in docs] for L in lengths}


@dataclass
class ContextPoint:
    length: int                       # requested prompt tokens
    prompt_tokens: list               # actual fed ids per prompt
    tau: float
    per_position: list
    seconds: float                    # this machine: target pass + drafter pass
    result: object = field(default=None, repr=False)   # the RunResult

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("length", "prompt_tokens", "tau", "per_position", "seconds")}


@dataclass
class ContextCurve:
    points: list
    clipped: list                     # requested lengths that do not fit the target's context
    target_context: int | None
    drafter_context: int | None       # the drafter's declared max_position_embeddings
    trained_length: int | None        # the longest training sequence, when known
    check: ContextCheck
    source: str
    depth: int
    max_new_tokens: int

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.points)

    def as_dict(self) -> dict:
        return {"points": [p.as_dict() for p in self.points], "clipped": self.clipped,
                "target_context": self.target_context, "drafter_context": self.drafter_context,
                "trained_length": self.trained_length, "check": self.check.as_dict(),
                "source": self.source, "depth": self.depth, "max_new_tokens": self.max_new_tokens,
                "seconds": self.seconds}

    def report_lines(self) -> list[str]:
        lines = [f"tau at depth {self.depth} against prompt length ({self.source}):"]
        lines += [f"  {p.length:>5} tokens: tau {p.tau:.3f} ({p.seconds:.1f}s)" for p in self.points]
        if self.clipped:
            lines.append(f"  clipped (past the target's context {self.target_context} with "
                         f"{self.max_new_tokens} new tokens): {self.clipped}")
        lines.append(f"drafter context: declared {self.drafter_context}, trained "
                     f"{self.trained_length or 'unknown'}; static check: {self.check.status}")
        return lines + [f"  {f}" for f in self.check.findings]


def context_curve(pair, lengths=DEFAULT_LENGTHS, n_docs: int = 1, depth: int = 4,
                  max_new_tokens: int = 32, kind: str | None = None, chat: bool | None = None,
                  trained_length: int | None = None) -> ContextCurve:
    """tau at each prompt length by the pair's one pass (T = 0), with the static check."""
    ctx = context_length(pair.target)
    fits = [L for L in lengths if ctx is None or L + max_new_tokens + depth <= ctx]
    clipped = [L for L in lengths if L not in fits]
    if clipped and ctx - max_new_tokens - depth > max(fits, default=0):
        fits.append(ctx - max_new_tokens - depth)      # the longest prompt that fits
    chat = bool(getattr(pair.tokenizer, "chat_template", None)) if chat is None else chat
    kind = kind or ("docs" if chat else "source")
    prompts = long_prompts(pair.tokenizer, fits, n_docs, kind, chat) if fits else {}
    points = []
    with pair.one_pass.depths_up_to(depth):
        for L in fits:
            t0 = time.perf_counter()
            res = pair.run([p for p, _ in prompts[L]], depth=depth, max_new_tokens=max_new_tokens,
                           progress=False)
            points.append(ContextPoint(L, [n for _, n in prompts[L]], res.metrics.accept_length,
                                       res.metrics.per_position_acceptance,
                                       time.perf_counter() - t0, res))
    dcfg = pair.drafter.config
    return ContextCurve(points, clipped, ctx, getattr(dcfg, "max_position_embeddings", None),
                        trained_length, check_context(dcfg, pair.target.config, trained_length),
                        source_note(kind), depth, max_new_tokens)
