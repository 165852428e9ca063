"""Draft-vocabulary coverage of a workload: the share of the target's tokens the drafter can never
draft, and the ceiling that puts on acceptance (docs/conditions.md, "Vocabulary coverage").

An EAGLE-3 drafter with a reduced vocabulary drafts only the target ids i + d2t[i], i < Vd (the
engines map draft ids this way; t2d marks the same set). A target token outside that set is never
drafted, so a workload rich in such tokens (another language, byte-level pieces a frequency-built
vocabulary dropped: MiaAI-Lab PR #43; z-lab/dflash #7) caps acceptance whatever the drafter
learned. Definitions, over the workload's target tokens (the target's greedy continuations, or a
recording's continuation tokens):

- **outside share** = #tokens not in the draft vocabulary / #tokens, per prompt, per value of a
  prompt field (`category`, `language`) and pooled; `inside_share` = 1 - outside share is the most
  a draft can match;
- **ceiling at depth k**: the chain walk of a drafter that proposes the target's own token whenever
  that token is in its vocabulary (T = 0): each verify step accepts the leading in-vocabulary tokens
  after the committed prefix, at most k. Its tau and per-position acceptance bound those of every
  drafter with this vocabulary on these continuations (greedy jumps cover a sequence in the fewest
  steps). Near a continuation's end the walk sees only the tokens there are.

Knows token lists and a vocabulary map; nothing about models or tokenizers.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass

import torch

from eagle_nb.loop.metrics import acceptance_metrics


def draft_vocab_mask(vocab_size: int, d2t: torch.Tensor | None = None,
                     t2d: torch.Tensor | None = None) -> torch.Tensor:
    """(V,) bool: the target ids the drafter can draft. From d2t offsets (what the engines map:
    target = i + d2t[i]), else from the t2d mask, else (neither: draft vocab == target vocab) all."""
    if d2t is not None:
        ids = torch.arange(d2t.numel()) + d2t.long().cpu()
        if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
            raise ValueError(f"d2t maps draft ids outside the target vocabulary 0..{vocab_size - 1} "
                             "(absolute ids instead of offsets? `eagle-nb inspect` names it)")
        mask = torch.zeros(vocab_size, dtype=torch.bool)
        mask[ids] = True
        return mask
    if t2d is not None:
        if t2d.numel() != vocab_size:
            raise ValueError(f"t2d has {t2d.numel()} entries, the target vocabulary {vocab_size}")
        return t2d.bool().cpu().reshape(-1).clone()
    return torch.ones(vocab_size, dtype=torch.bool)


def ceiling_counts(tokens, inside, depth: int) -> list[int]:
    """Accepted counts of the vocabulary-limited oracle's verify steps over one continuation: the
    first token comes from prefill, each step accepts the in-vocabulary run after it (<= depth).
    `inside`: the (V,) bool mask, as a tensor or a list."""
    flags = inside.tolist() if isinstance(inside, torch.Tensor) else inside
    ok = [flags[t] for t in tokens]
    counts, L = [], 1
    while L < len(ok):
        a = 0
        while a < depth and L + a < len(ok) and ok[L + a]:
            a += 1
        counts.append(a)
        L += a + 1
    return counts


@dataclass
class Coverage:
    vocab_size: int
    draft_vocab_size: int
    tokens: int
    outside: int
    outside_share: float
    per_prompt: list                 # outside share per prompt (None: no tokens)
    groups: dict                     # field -> value -> {"prompts", "tokens", "outside", "outside_share"}
    top_outside: list                # [(target id, count)] most frequent tokens outside, up to 10
    depth: int
    tau_ceiling: float | None        # the oracle walk's tau at `depth` (None: no verify step)
    per_position_ceiling: list       # its per-position acceptance (vLLM's definition)

    @property
    def inside_share(self) -> float:
        return 1 - self.outside_share

    def as_dict(self) -> dict:
        return {**asdict(self), "inside_share": self.inside_share}

    def report_lines(self, decode=None) -> list[str]:
        show = (lambda t: f"{t} {decode([t])!r}") if decode else str
        lines = [f"draft vocabulary: {self.draft_vocab_size} of {self.vocab_size} target ids",
                 f"workload tokens outside it: {100 * self.outside_share:.2f}% ({self.outside} of "
                 f"{self.tokens}); a draft can match at most {100 * self.inside_share:.2f}%"]
        if self.tau_ceiling is not None:
            per = ", ".join(f"{r:.3f}" for r in self.per_position_ceiling)
            lines.append(f"ceiling at depth {self.depth} (a drafter right on every token it can "
                         f"draft, T = 0): tau {self.tau_ceiling:.3f}, per-position {per}")
        for field, vals in self.groups.items():
            for v, g in vals.items():
                lines.append(f"  {field}={v}: {100 * g['outside_share']:.2f}% outside "
                             f"({g['outside']} of {g['tokens']} tokens, {g['prompts']} prompts)")
        if self.top_outside:
            lines.append("most frequent outside: " + ", ".join(f"{show(t)} x{n}" for t, n in self.top_outside))
        return lines


def coverage(continuations, inside: torch.Tensor, depth: int = 4, fields=None) -> Coverage:
    """Coverage of `continuations` (one token list per prompt) by the draft vocabulary `inside`
    ((V,) bool, `draft_vocab_mask`). `fields`: optional per-prompt dicts of labels
    ({"language": "es", "category": "code"}) to group by."""
    inside = inside.bool().cpu()
    conts = [[int(t) for t in c] for c in continuations]
    fields = fields or [{} for _ in conts]
    if len(fields) != len(conts):
        raise ValueError(f"{len(fields)} label rows for {len(conts)} continuations")
    V = inside.numel()
    bad = [t for c in conts for t in c if not 0 <= t < V]
    if bad:
        raise ValueError(f"token id {bad[0]} outside the target vocabulary 0..{V - 1}")
    flags = inside.tolist()                       # python bools: per-token lookups stay cheap
    out_per = [sum(not flags[t] for t in c) for c in conts]
    groups: dict = {}
    for c, n_out, labels in zip(conts, out_per, fields):
        for f, v in labels.items():
            g = groups.setdefault(f, {}).setdefault(str(v), {"prompts": 0, "tokens": 0, "outside": 0})
            g["prompts"], g["tokens"], g["outside"] = g["prompts"] + 1, g["tokens"] + len(c), g["outside"] + n_out
    for vals in groups.values():
        for g in vals.values():
            g["outside_share"] = g["outside"] / g["tokens"] if g["tokens"] else 0.0
    counts = [a for c in conts for a in ceiling_counts(c, flags, depth)]
    m = acceptance_metrics(counts, depth) if counts else None
    total, outside = sum(map(len, conts)), sum(out_per)
    top = Counter(t for c in conts for t in c if not flags[t]).most_common(10)
    return Coverage(V, int(inside.sum()), total, outside, outside / total if total else 0.0,
                    [n / len(c) if c else None for c, n in zip(conts, out_per)], groups, top, depth,
                    m.accept_length if m else None, m.per_position_acceptance if m else [])
