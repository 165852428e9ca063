"""Requests the target writes itself (Magpie, arXiv 2406.08464): shown its chat template up to an
open user turn (its default system turn, then the user header), an instruct model trained on
self-instructed chats writes a plausible user request and closes the turn. SmolLM2-135M-Instruct
was fine-tuned on smol-smoltalk, which holds such requests (HuggingFaceTB/smoltalk's dataset
card), so its own requests are the chat traffic it was made for: how-to questions, explanations,
short writing tasks, in English (the same trick in the five other languages gave garbled text).

Sampled at T = 1 with top-p 0.95 by vLLM's offline engine through engines/vllm_batch.py; a request
is kept when the model closed the turn within the token budget, it is 15 to 2,000 characters, new,
and shares less than 60% of its words with every evaluation prompt. Sampling on a CPU engine is
not reproducible across machines, so the kept texts are committed (as the stream's written
requests are) and a later run reads them back instead of writing new ones.
Knows the template and the filter; the engine call is the caller's.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from eagle_nb.train.request_mix import MAX_CHARS

MARK = "\u2063REQUEST\u2063"       # a user turn's place in the rendered template
TEMPERATURE, TOP_P, MAX_TOKENS = 1.0, 0.95, 64
MIN_CHARS, MAX_OVERLAP = 15, 0.6
SOURCE = "target"                 # the `by` of a request's source: written by the target itself


def user_turn_prefix(tok) -> list[int]:
    """Token ids of the chat template up to where a user's text starts (default system turn and
    the user header included)."""
    text = tok.apply_chat_template([{"role": "user", "content": MARK}], tokenize=False)
    if MARK not in text:
        raise ValueError(f"{tok.name_or_path}: its chat template does not place the user's text verbatim")
    return tok(text[:text.index(MARK)], add_special_tokens=False)["input_ids"]


def words(text: str) -> set[str]:
    return set(text.lower().replace("?", " ").replace(".", " ").replace(",", " ").split())


def overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / max(len(a | b), 1)


def kept(texts: list[str | None], evals: list[str], n: int) -> list[str]:
    """The first `n` usable texts in order: closed turns (None: the model ran out of tokens),
    MIN_CHARS to MAX_CHARS long, distinct, under MAX_OVERLAP of every evaluation prompt's words."""
    ev = [words(e) for e in evals]
    out, seen = [], set()
    for t in texts:
        if t is None:
            continue
        t = t.strip()
        if not MIN_CHARS <= len(t) <= MAX_CHARS or t.lower() in seen:
            continue
        w = words(t)
        if any(overlap(w, e) >= MAX_OVERLAP for e in ev):
            continue
        seen.add(t.lower())
        out.append(t)
        if len(out) == n:
            break
    return out


def written_requests(work: Path, tok, eos: int, n: int, evals: list[str],
                     generate: Callable[[Path, Path, int], None], committed: list[str] = ()) -> list[str]:
    """`n` requests the target wrote: the committed ones first, then new ones asked of
    `generate(requests_in, out, max_new_tokens)` (resumable: it appends to `out`)."""
    if len(committed) >= n:
        return list(committed[:n])
    prefix, inp, out = user_turn_prefix(tok), work / "self_to_write.jsonl", work / "self_written.jsonl"
    asked = 0
    for _ in range(4):                                    # about 1 in 4 is dropped: ask again
        have = kept(list(committed) + _texts(out, tok, eos), evals, n)
        if len(have) == n:
            return have
        asked += int((n - len(have)) * 1.5) + 16
        inp.write_text("".join(json.dumps({"id": i, "prompt_ids": prefix, "temperature": TEMPERATURE,
                                           "top_p": TOP_P}) + "\n" for i in range(asked)))
        generate(inp, out, MAX_TOKENS)
    have = kept(list(committed) + _texts(out, tok, eos), evals, n)
    if len(have) < n:
        raise RuntimeError(f"{out}: only {len(have)} of {n} self-written requests passed the filter "
                           f"after asking {asked}; ask for fewer (--self-requests)")
    return have


def _texts(out: Path, tok, eos: int) -> list[str | None]:
    """The written turns of `out` in id order; None where the turn was not closed."""
    if not out.is_file():
        return []
    rows = {}
    for line in out.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:                              # a line cut by a stop
            continue
        rows[r["id"]] = r["answer_ids"]
    return [tok.decode(ids[:-1], skip_special_tokens=True) if ids and ids[-1] == eos else None
            for _, ids in sorted(rows.items())]
