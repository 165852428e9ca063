"""Chain acceptance at T > 0 from one drafter pass, exact in expectation.

Every verify rule emits the target's distribution (verify_rules.py), so the tokens a sampled run
commits are a trajectory x the target could have sampled alone. Given that trajectory, whether the
draft at chain position i is accepted depends only on the token x_i emitted there and on the
drafts' prefix, which, when positions < i were accepted, is the trajectory's own tokens. Its
probability is a closed form of the rule (q, p: the drafter's and the target's distributions at
temperature T, q in target ids, zero outside the draft vocabulary):

| rule      | P(draft i accepted | the run emitted x_i there)                          |
|-----------|--------------------------------------------------------------------------|
| `sampled` | q(x) min(1, p(x)/q(x)) / p(x) = min(1, q(x)/p(x))                          |
| `argmax`  | 1[x = argmax q] (the one-hot draft is accepted w.p. p(x) and is then x)    |
| `strict`  | q(x) (the draft sample equals the target's own sample x)                   |

and acceptances at successive positions are independent given the trajectory. The training-time
test layout (model/ttt.py) fed the trajectory computes q at every position and chain step in one
pass; a dynamic program over where verify steps start (from the first committed token; a step
from p accepting m drafts emits m + 1 tokens and the next starts at p + m + 1, stopping where the
live loop stops: max_new_tokens, or EOS) then gives the expected histogram of accepted counts at
every depth, hence expected tau and per-position acceptance (metrics.from_histogram: ratios of
expected totals, what pooling many requests converges to). Averaged over trajectories sampled with
different seeds it is the live loop's mean, with the acceptance coin flips integrated out.

Knows the drafter, the rules' names and the metrics; not how the trajectory was sampled
(target_states.py). Chains only: trees stay on the live loop.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from eagle_nb.loop import verify_rules as VR
from eagle_nb.loop.metrics import AcceptanceMetrics, from_histogram
from eagle_nb.loop.onepass import pad_batch, columns_needed
from eagle_nb.model.drafter import FC_STRICT
from eagle_nb.model.ttt import ttt_steps

COMPUTED_BY = "one-pass (T > 0, expected)"


def target_probs(head, final: torch.Tensor, seq: torch.Tensor, T0: int, temperature: float) -> torch.Tensor:
    """(len(seq),) float64: the target's probability at `temperature` of each trajectory token t
    >= T0 given the tokens before it (0 before T0), from the final states (n_fed, H) and the
    target's output head. Rows in chunks: the vocabulary is wide."""
    out = torch.zeros(seq.numel(), dtype=torch.float64)
    for a in range(T0 - 1, min(final.shape[0], seq.numel() - 1), 256):
        b = min(a + 256, final.shape[0], seq.numel() - 1)
        logp = (head(final[a:b]).double() / temperature).log_softmax(-1)
        out[a + 1:b + 1] = logp.gather(-1, seq[a + 1:b + 1, None].to(logp.device))[:, 0].exp().cpu()
    return out


def _emitted_q(logp: torch.Tensor, tokens: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    """q(x) in target ids: the probability mass of the draft ids that map to token x. logp
    (B, C, Vd) log-probabilities over draft ids, tokens (B, C), target_ids (Vd,)."""
    V = int(target_ids.max()) + 1
    if target_ids.unique().numel() == target_ids.numel():       # one draft id per target id
        inv = torch.full((max(V, int(tokens.max()) + 1),), -1, dtype=torch.long, device=logp.device)
        inv[target_ids] = torch.arange(target_ids.numel(), device=logp.device)
        d = inv[tokens]
        return logp.gather(-1, d.clamp(min=0)[..., None])[..., 0].exp() * (d >= 0)
    same = target_ids[None, None, :] == tokens[..., None]         # a named fault's table
    return (logp.exp() * same).sum(-1)


@torch.no_grad()
def accept_probabilities(drafter, ids: list[torch.Tensor], feats: list[torch.Tensor],
                         prompt_lens: list[int], max_new_tokens, k_max: int, temperature: float,
                         rule: str, p_emitted: list[torch.Tensor] | None, *, fc_policy: str = FC_STRICT,
                         d2t: torch.Tensor | None = None, batch_size: int = 16) -> list[torch.Tensor]:
    """Per prompt (P_i, k_max) float64: row r = drafting position p = T0 + r, column j: the
    probability that draft j + 1 from p is accepted given the trajectory's token p + 1 + j, the
    drafter's steps < j fed the trajectory. ids/feats as onepass.match_lengths; p_emitted[b]
    (len(ids[b]),): the target's probability of each trajectory token (target_probs; read by
    `sampled` only)."""
    VR.check_rule(rule)
    if temperature <= 0:
        raise ValueError(f"temperature {temperature}: at T = 0 use the greedy one pass (onepass.py)")
    if rule == VR.SAMPLED and p_emitted is None:
        raise ValueError("the 'sampled' rule needs the target's probability of each trajectory token")
    budgets = max_new_tokens if isinstance(max_new_tokens, (list, tuple)) else [max_new_tokens] * len(ids)
    columns = [columns_needed(T0, n) for T0, n in zip(prompt_lens, budgets)]
    for b, (x, f, c) in enumerate(zip(ids, feats, columns)):
        if x.numel() < c + k_max + 1 or f.shape[0] < c:
            raise ValueError(f"prompt {b}: depth {k_max} needs {c + k_max + 1} trajectory tokens and {c} "
                             f"feature rows; have {x.numel()} and {f.shape[0]}")
    dev, dtype = drafter.fc.weight.device, drafter.fc.weight.dtype
    Vd = drafter.config.draft_vocab_size
    target_ids = drafter.draft_to_target(torch.arange(Vd, device=dev), d2t)
    out = []
    for s in range(0, len(ids), batch_size):
        cols, starts = columns[s:s + batch_size], [T0 - 1 for T0 in prompt_lens[s:s + batch_size]]
        first = min(starts)
        x, f = pad_batch(ids[s:s + batch_size], feats[s:s + batch_size], cols, k_max, dev, dtype)
        C = f.shape[1]
        probs = []
        for j, logits in enumerate(ttt_steps(drafter, x, drafter.fuse(f, fc_policy), k_max, first)):
            logits = logits[:, first:] if j == 0 else logits                # (B, C - first, Vd)
            tok = x[:, first + j + 2:C + j + 2]                              # the trajectory's token
            if rule == VR.ARGMAX:
                a = (drafter.draft_to_target(logits.argmax(-1), d2t) == tok).double()
            else:
                q = _emitted_q((logits.double() / temperature).log_softmax(-1), tok, target_ids)
                if rule == VR.STRICT:
                    a = q
                else:
                    p = torch.stack([_row(p_emitted[s + b], first + j + 2, C + j + 2)
                                     for b in range(x.shape[0])]).to(q.device)
                    a = torch.where(p > 0, (q / p.clamp(min=1e-300)).clamp(max=1.0), torch.ones_like(q))
            probs.append(a)
        a = torch.stack(probs, -1).cpu()                                     # (B, C - first, k_max)
        for b, (c, st) in enumerate(zip(cols, starts)):
            out.append(a[b, st - first:max(c - first, st - first)])
    return out


def _row(t: torch.Tensor, a: int, b: int) -> torch.Tensor:
    """t[a:b], zero-padded past its end (padding columns of shorter prompts)."""
    r = t[a:b].double()
    return torch.cat([r, r.new_zeros(b - a - r.numel())]) if r.numel() < b - a else r


def expected_histogram(a: torch.Tensor, seq, T0: int, depth: int, max_new_tokens: int,
                       eos_token_id=None) -> list[float]:
    """Expected number of verify steps accepting m = 0..depth drafts along one trajectory: a (P, >=
    depth) acceptance probabilities (accept_probabilities), seq the trajectory ids. Steps start at
    the first committed token T0 and at p + m + 1 after a step from p accepting m, while fewer
    than max_new_tokens tokens are committed and no EOS has been (the live loop's stops)."""
    s = seq.tolist() if isinstance(seq, torch.Tensor) else list(seq)
    eos = next((t for t in range(T0, len(s)) if s[t] == eos_token_id), len(s)) \
        if eos_token_id is not None else len(s)
    rows = a[:, :depth].tolist()
    w = [0.0] * (len(rows) + depth + 2)
    w[0] = 1.0
    hist = [0.0] * (depth + 1)
    for r, probs in enumerate(rows):
        if w[r] == 0.0 or r + 1 >= max_new_tokens or T0 + r >= eos:
            continue
        reach = w[r]
        for m in range(depth + 1):
            pm = reach * (1.0 - probs[m]) if m < depth else reach      # exactly m accepted
            hist[m] += pm
            w[r + m + 1] += pm
            if m < depth:
                reach *= probs[m]
    return hist


@dataclass
class SampledChainRun:
    """One depth's expected chain run over every prompt's trajectory."""
    hists: list[list[float]]          # per prompt: expected steps accepting m drafts
    metrics: AcceptanceMetrics        # pooled: ratios of expected totals
    seconds: float = 0.0


def sampled_chain_run(probs: list[torch.Tensor], seqs: list, prompt_lens: list[int], depth: int,
                      max_new_tokens, eos_token_id=None) -> SampledChainRun:
    """Expected depth-`depth` metrics from accept_probabilities' output (computed at k_max >=
    depth), one budget or one per prompt."""
    t0 = time.perf_counter()
    if probs and not 1 <= depth <= probs[0].shape[-1]:
        raise ValueError(f"depth {depth} outside 1..{probs[0].shape[-1]} (the depths this pass computed)")
    budgets = max_new_tokens if isinstance(max_new_tokens, (list, tuple)) else [max_new_tokens] * len(seqs)
    hists = [expected_histogram(a, seq, T0, depth, n, eos_token_id)
             for a, seq, T0, n in zip(probs, seqs, prompt_lens, budgets)]
    pooled = [sum(h[m] for h in hists) for m in range(depth + 1)]
    return SampledChainRun(hists, from_histogram(pooled, depth), time.perf_counter() - t0)
