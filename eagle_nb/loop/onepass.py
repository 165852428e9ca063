"""Greedy chain acceptance at every depth from one drafter pass: match lengths, then a walk.

Why this is exact: with greedy verification the committed tokens are the target's greedy tokens
whatever the drafter proposes, and the drafts from a committed position p (x_next = token p) depend
only on the committed prefix: step-0 keys of positions < p (target features), then the drafter's
own steps. Draft j+1 is compared only when drafts 1..j matched, i.e. when the tokens fed to steps
1..j were the target's own tokens. So the training-time-test layout (model/ttt.py), fed the target's
continuation, computes at column t = p - 1 exactly the drafts the live loop (chain.generate) makes
from p, up to the first mismatch. The match length

    m(p) = #leading j in 0..k_max-1 with draft_j(p - 1) == token p + 1 + j

is one number per position, for all positions in k_max drafter steps. A depth-k run then walks
p -> p + min(m(p), k) + 1 from p = T0, stopping where `chain.generate` stops (max_new_tokens,
EOS as x_next, EOS among the accepted drafts) and cutting as `chain.finish` cuts.

What differs from the live loop is floating point only (batched vs chunked attention sums, the
target's features from one forward vs verify chunks): an argmax can flip where the top-2 margin is
~1e-6. Every walk records the smallest draft margin among the decisions it used (`near_ties`).
The same pass gives the accuracies trainers log, teacher-forced on the committed tokens: acc_j,
step j right whatever steps < j did (SpecForge, SafeAILab EAGLE), and the chained rate, steps
0..j all right (speculators' full_acc_j).

Knows the drafter and SpecStats/metrics; not how the target states were obtained (target_states.py).
Drafts after a first rejection are not computed (the live loop feeds its wrong draft there): a
step's `draft_tokens` holds the accepted drafts and the first rejected one. Greedy chains only:
sampling (T > 0) and trees stay on the live loop.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from eagle_nb.loop.chain import SpecStats, VerifyStep
from eagle_nb.loop.metrics import AcceptanceMetrics, from_stats
from eagle_nb.model.drafter import FC_STRICT
from eagle_nb.model.ttt import ttt_steps

COMPUTED_BY = "one-pass"
NEAR_TIE = 1e-4          # a draft decision with a top-2 logit margin under this could flip


@dataclass
class Matches:
    """Per prompt, row r = drafting position p = T0 + r (x_next = token p; drafter column p - 1),
    column j = draft step: `pred` the drafted target id with steps < j fed the target's tokens,
    `hit` pred == token p + 1 + j, `margin` the top-1 minus top-2 draft logit."""
    k_max: int
    pred: list[torch.Tensor]         # (P_i, k_max) int64
    hit: list[torch.Tensor]          # (P_i, k_max) bool
    margin: list[torch.Tensor]       # (P_i, k_max) float32
    seconds: float = 0.0

    def lengths(self, b: int) -> torch.Tensor:
        """m(p) for every row of prompt b: leading hits, capped at k_max. (P_i,)"""
        return self.hit[b].long().cumprod(-1).sum(-1)

    def as_lists(self, b: int) -> tuple[list, list, list, list, list]:
        """Prompt b as Python lists (walks index them thousands of times): m(p), pred, margin, and
        running counts per step j over rows < r: hits of step j, and rows with m(p) > j. Cached."""
        cache = self.__dict__.setdefault("_lists", {})
        if b not in cache:
            m = self.lengths(b)
            zero = torch.zeros(1, self.k_max, dtype=torch.long)
            hits = torch.cat([zero, self.hit[b].long().cumsum(0)])
            chain = (m[:, None] > torch.arange(self.k_max)[None, :]).long()
            chain = torch.cat([zero, chain.cumsum(0)])
            cache[b] = (m.tolist(), self.pred[b].tolist(), self.margin[b].tolist(), hits.tolist(),
                        chain.tolist())
        return cache[b]

    def extend(self, other: Matches) -> None:
        if other.k_max != self.k_max:
            raise ValueError(f"cannot join passes of depth {self.k_max} and {other.k_max}")
        self.pred += other.pred
        self.hit += other.hit
        self.margin += other.margin
        self.seconds += other.seconds


def pad_batch(ids, feats, columns, k_max, dev, dtype):
    B, C = len(columns), max(max(columns), 1)
    x = torch.zeros(B, C + k_max + 1, dtype=torch.long, device=dev)
    f = torch.zeros(B, C, feats[0].shape[-1], dtype=dtype, device=dev)
    for b, c in enumerate(columns):
        seq = ids[b][:C + k_max + 1]
        x[b, :seq.numel()] = seq.to(dev)
        f[b, :c] = feats[b][:c].to(dev, dtype)
    return x, f


@torch.no_grad()
def match_lengths(drafter, ids: list[torch.Tensor], feats: list[torch.Tensor],
                  prompt_lens: list[int], max_new_tokens, k_max: int, *,
                  fc_policy: str = FC_STRICT, d2t: torch.Tensor | None = None,
                  batch_size: int = 16, known: list[int] | None = None) -> Matches:
    """Drafts from every position a walk of `max_new_tokens` (one budget or one per prompt) can
    visit, `batch_size` prompts per TTT pass (right-padded; steps >= 1 only over the columns
    from the batch's first drafting position). ids[b] (T,) must hold T0 + max_new_tokens + k_max - 1
    tokens and feats[b] (n_fed, W) T0 + max_new_tokens - 2 rows (the live loop's need). `known[b]`:
    how many of ids[b] are the target's (a record that ends at its budget, padded past it): drafts
    compared with a token past it never count as hits."""
    import time
    t0 = time.perf_counter()
    budgets = max_new_tokens if isinstance(max_new_tokens, (list, tuple)) else [max_new_tokens] * len(ids)
    columns = [columns_needed(T0, n) for T0, n in zip(prompt_lens, budgets)]
    for b, (x, f, c) in enumerate(zip(ids, feats, columns)):
        if x.numel() < c + k_max + 1 or f.shape[0] < c:
            raise ValueError(f"prompt {b}: {c - prompt_lens[b] + 1} drafting positions at depth "
                             f"{k_max} need {c + k_max + 1} tokens and {c} feature rows; have "
                             f"{x.numel()} and {f.shape[0]}")
    dev, dtype = drafter.fc.weight.device, drafter.fc.weight.dtype
    out = Matches(k_max, [], [], [])
    for s in range(0, len(ids), batch_size):
        cols, starts = columns[s:s + batch_size], [T0 - 1 for T0 in prompt_lens[s:s + batch_size]]
        first = min(starts)
        x, f = pad_batch(ids[s:s + batch_size], feats[s:s + batch_size], cols, k_max, dev, dtype)
        C = f.shape[1]
        preds, hits, margins = [], [], []
        for j, logits in enumerate(ttt_steps(drafter, x, drafter.fuse(f, fc_policy), k_max, first)):
            logits = logits[:, first:] if j == 0 else logits                # (B, C - first, Vd)
            top = logits.topk(2, -1)
            margin = (top.values[..., 0] - top.values[..., 1]).float()
            best = top.indices[..., 0]
            tie = ~(margin > 0)                  # exact tie or NaN: argmax's rule, as chain.generate
            if tie.any():
                best = torch.where(tie, logits.argmax(-1), best)
            tid = drafter.draft_to_target(best, d2t)
            preds.append(tid)
            hit = tid == x[:, first + j + 2:C + j + 2]
            if known is not None:
                idx = torch.arange(first + j + 2, C + j + 2, device=dev)
                hit &= idx[None, :] < torch.tensor(known[s:s + batch_size], device=dev)[:, None]
            hits.append(hit)
            margins.append(margin)
        pred, hit, margin = (torch.stack(v, -1).cpu() for v in (preds, hits, margins))
        for b, (c, a) in enumerate(zip(cols, starts)):
            rows = slice(a - first, max(c - first, a - first))
            out.pred.append(pred[b, rows])
            out.hit.append(hit[b, rows])
            out.margin.append(margin[b, rows])
    out.seconds = time.perf_counter() - t0
    return out


@dataclass
class Walk:
    accept_counts: list[int]
    positions: list[int]             # p of each verify step
    tokens: list[int]                # committed ids, cut as chain.finish cuts
    min_margin: float = float("inf")  # smallest draft margin among the decisions used
    tie_at: list[tuple[int, int, float]] = field(default_factory=list)  # (p, j, margin) < NEAR_TIE


def walk(m, seq, T0: int, depth: int, max_new_tokens: int, eos_token_id=None,
         margin=None) -> Walk:
    """The live loop's verify steps from match lengths m (row p - T0): accept min(m(p), k).
    m, seq, margin: tensors or (nested) lists."""
    s = seq.tolist() if isinstance(seq, torch.Tensor) else seq
    margin = margin.tolist() if isinstance(margin, torch.Tensor) else margin
    p, tokens, counts, ps = T0, [s[T0]], [], []
    low, ties = float("inf"), []
    while len(tokens) < max_new_tokens and tokens[-1] != eos_token_id:
        a = min(int(m[p - T0]), depth)
        counts.append(a)
        ps.append(p)
        if margin is not None:
            used = margin[p - T0][:min(a + 1, depth)]              # accepted + first rejected
            low = min(low, *used)
            ties += [(p, j, v) for j, v in enumerate(used) if v < NEAR_TIE]
        accepted = s[p + 1:p + a + 1]
        tokens.extend(s[p + 1:p + a + 2])
        p += a + 1
        if eos_token_id is not None and eos_token_id in accepted:
            break
    if eos_token_id is not None and eos_token_id in tokens:
        tokens = tokens[:tokens.index(eos_token_id) + 1]
    return Walk(counts, ps, tokens[:max_new_tokens], low, ties)


def columns_needed(prompt_len: int, max_new_tokens: int) -> int:
    """Columns a walk can visit: x_next positions T0 .. T0 + max_new_tokens - 2, column p - 1."""
    return max(prompt_len + max_new_tokens - 2, 0)


@dataclass
class ChainRun:
    """One depth's greedy chain run over every prompt, from one pass."""
    stats: list                       # SpecStats per prompt (timings zero: not measured)
    metrics: AcceptanceMetrics
    walks: list[Walk]
    censored: int = 0                 # steps whose drafts pass the known tokens, all known ones hit

    @property
    def near_ties(self) -> list[tuple[int, int, int, float]]:
        """(prompt, p, step, margin) of every draft decision with a margin under NEAR_TIE."""
        return [(b, *t) for b, w in enumerate(self.walks) for t in w.tie_at]


def chain_run(matches: Matches, seqs: list[torch.Tensor], prompt_lens: list[int], depth: int,
              max_new_tokens, eos_token_id=None, known: list[int] | None = None) -> ChainRun:
    """Depth-`depth` greedy chain stats per prompt (SpecStats, as chain.generate returns them),
    pooled with the live loop's own `from_stats`, plus teacher-forced per-step accuracy.
    `max_new_tokens`: one budget, or one per prompt. `known` as for match_lengths: a step whose
    drafts reach past the known tokens with every known one accepted is counted with the known
    part only (a lower bound) and counted in `censored`."""
    if not 1 <= depth <= matches.k_max:
        raise ValueError(f"depth {depth} outside 1..{matches.k_max} (the depths this pass computed)")
    budgets = max_new_tokens if isinstance(max_new_tokens, (list, tuple)) else [max_new_tokens] * len(seqs)
    stats, walks, censored = [], [], 0
    hits, chained, tried = [0] * depth, [0] * depth, [0] * depth
    for b, (seq, T0) in enumerate(zip(seqs, prompt_lens)):
        m, pred, margin, cum, cum_chain = matches.as_lists(b)
        s = seq.tolist()
        w = walk(m, s, T0, depth, budgets[b], eos_token_id, margin)
        st = SpecStats(depth, 0.0, T0, tokens=w.tokens)
        st.steps = [VerifyStep(a, pred[p - T0][:min(a + 1, depth)], s[p + 1:p + depth + 2])
                    for p, a in zip(w.positions, w.accept_counts)]
        stats.append(st)
        walks.append(w)
        if known is not None:
            censored += sum(p + depth >= known[b] and a == known[b] - p - 1
                            for p, a in zip(w.positions, w.accept_counts))
        for j in range(depth):            # rows p - T0 < len(tokens) - 1 - j: token p+1+j committed
            r = max(len(w.tokens) - 1 - j, 0)
            hits[j] += cum[r][j]
            chained[j] += cum_chain[r][j]
            tried[j] += r
    metrics = from_stats(stats)
    acc = [h / n if n else None for h, n in zip(hits, tried)]
    chain = [h / n if n else None for h, n in zip(chained, tried)]
    return ChainRun(stats, dataclasses.replace(metrics, teacher_forced_accuracy=acc,
                                               teacher_forced_chain_accuracy=chain), walks, censored)
