"""Greedy chain speculation replayed against a recording: τ at any depth without the target.

Why this is exact: with greedy verification the committed tokens are always the target's greedy
tokens, so every cycle's verified positions, target tokens and step-0 drafter inputs (the target's
aux states at committed positions) are determined by one greedy continuation and its aux states,
whatever the drafter proposes. Replaying `speculate.generate`'s drafter calls against a recording
therefore reproduces its accept counts; the only difference is floating-point: the live loop
computes committed states in chunks of k+1 tokens, the recording one token at a time (equal up to
~1e-6; a tie in the drafter's argmax could flip, the test on the shipped pair checks it does not).

By default the depth is answered by one drafter pass over every position of `batch_size` records
at a time (onepass.py, exact for the same reason); `one_pass=False` replays the loop's drafter calls
step by step (`replay_record`, the reference the one pass is tested against).

For teacher-forced recordings (SpecForge / speculators training files) the "continuation" is
dataset text, so τ is an estimate; results carry that label. Memory: the drafter plus one record.
Knows nothing about targets or checkpoint files; greedy only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from eagle_nb.loop import onepass as OP
from eagle_nb.loop.chain import SpecStats, VerifyStep, accept_greedy
from eagle_nb.loop.metrics import (
    AcceptanceMetrics,
    from_stats,
    sglang_log_line,
    vllm_log_line,
)
from eagle_nb.loop.recording import Recording
from eagle_nb.loop.records import Record, RecordingError
from eagle_nb.model.layers import eagle3_layers


def check_record(rec: Record, depth: int, max_new_tokens: int) -> int:
    """Tokens a depth-`depth` replay of `max_new_tokens` reads from `rec` (prompt included)."""
    S, T0, F = rec.input_ids, rec.prompt_len, rec.aux
    need = T0 + max_new_tokens + depth
    if S.numel() < need or F.shape[0] < T0 + max_new_tokens - 1:
        raise RecordingError(f"record {rec.name}: {S.numel() - T0} recorded tokens after the prompt; "
                             f"max_new_tokens={max_new_tokens} at depth {depth} needs "
                             f"{max_new_tokens + depth}")
    return need


@torch.no_grad()
def replay_record(drafter, rec: Record, depth: int, max_new_tokens: int, eos_token_id=None) -> SpecStats:
    """One prompt's greedy speculation at `depth`, target tokens and features from `rec`: the live
    loop's drafter calls step by step (the reference the one pass is tested against)."""
    S, T0, F = rec.input_ids, rec.prompt_len, rec.aux
    check_record(rec, depth, max_new_tokens)
    t_start = time.perf_counter()
    dev, fdtype = drafter.fc.weight.device, drafter.fc.weight.dtype
    stats = SpecStats(depth, 0.0, T0)
    dcache = drafter.new_cache(1, T0 + max_new_tokens + 2 * depth + 2)
    tokens = [int(S[T0])]                                    # the prefill's token, not speculative
    pend_ids, pend_feats, dstart = S[1:T0 + 1], F[:T0], 0
    while len(tokens) < max_new_tokens and tokens[-1] != eos_token_id:
        n = T0 + len(tokens) - 1                             # committed target positions
        t0 = time.perf_counter()
        # the drafter calls of speculate.generate, greedy: extend with target features, k-1 own steps
        dcache.rollback(dstart)
        lg, h = drafter.step(pend_ids[None].to(dev), drafter.fuse(pend_feats[None].to(dev, fdtype)),
                             dcache, dstart)
        dcache.advance(dstart + pend_ids.numel())
        drafts = []
        for i in range(depth):
            tid = drafter.draft_to_target(lg[:, -1].argmax(-1))
            drafts.append(tid)
            if i < depth - 1:
                pos = dcache.pos
                lg, h = drafter.step(tid[:, None], h[:, -1:], dcache, pos)
                dcache.advance(pos + 1)
        draft_ids = torch.stack(drafts, 1)[0].cpu()            # (k,)
        # NOTE: entries after the first rejection are the greedy continuation, not what the target
        # would predict after a rejected draft (unknowable offline); accept counts never use them.
        target_tokens = S[n + 1:n + depth + 2]                 # the target's greedy tokens there
        a = accept_greedy(draft_ids, target_tokens)
        accepted = draft_ids[:a].tolist()
        tokens.extend(accepted + [int(target_tokens[a])])
        stats.steps.append(VerifyStep(a, draft_ids.tolist(), target_tokens.tolist(),
                                      time.perf_counter() - t0, 0.0))
        pend_ids, pend_feats, dstart = S[n + 1:n + a + 2], F[n:n + a + 1], n
        if eos_token_id is not None and eos_token_id in accepted:
            break
    if eos_token_id is not None and eos_token_id in tokens:
        tokens = tokens[:tokens.index(eos_token_id) + 1]
    stats.tokens = tokens[:max_new_tokens]
    stats.total_s = time.perf_counter() - t_start
    return stats


@dataclass
class ReplayResult:
    setting: dict
    stats: list                               # SpecStats per record
    metrics: AcceptanceMetrics
    estimate: bool                            # teacher-forced features: tau is an estimate
    seconds: float
    notes: list[str] = field(default_factory=list)
    computed_by: str = "one-pass"

    @property
    def new_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.stats)

    def summary(self) -> dict:
        m = self.metrics
        return {"setting": self.setting, "computed_by": self.computed_by, "tau_is_estimate": self.estimate,
                "accept_length": m.accept_length, "per_position_acceptance": m.per_position_acceptance,
                "draft_acceptance_rate": m.draft_acceptance_rate, "conditional_alpha": m.conditional_alpha,
                "accept_histogram": m.accept_histogram, "verify_steps": m.verify_steps,
                "sglang_log_line": sglang_log_line(m), "vllm_log_line": vllm_log_line(m),
                "new_tokens": self.new_tokens, "replay_s": self.seconds,
                "replay_s_per_1k_tokens": 1000 * self.seconds / max(self.new_tokens, 1), "notes": self.notes}

    def report_text(self) -> str:
        s = self.summary()
        label = "ESTIMATE (teacher-forced dataset text)" if self.estimate else "exact (recorded greedy output)"
        return "\n".join([f"setting: {self.setting}", *[f"note: {n}" for n in self.notes],
                          f"accept length (tau): {s['accept_length']:.3f} over {s['verify_steps']} "
                          f"verify steps, {label}; computed by {self.computed_by}",
                          f"SGLang: {sglang_log_line(self.metrics, label=True)}", f"vLLM: {s['vllm_log_line']}",
                          f"replay: {s['replay_s']:.2f}s, {s['replay_s_per_1k_tokens']:.2f}s per 1k tokens"])


class OnePassBatch:
    """Records gathered `batch_size` at a time, each cut to what a depth-k replay reads (so only
    the batch's slices stay in memory), then match lengths per batch and one walk at the end."""

    def __init__(self, drafter, depth: int, batch_size: int):
        self.drafter, self.depth, self.batch_size = drafter, depth, batch_size
        self.ids, self.lens, self.budgets, self.feats = [], [], [], []
        self.matches = OP.Matches(depth, [], [], [])
        self.done = 0

    def add(self, r: Record, n: int) -> None:
        need = check_record(r, self.depth, n)
        self.ids.append(r.input_ids[:need].clone())
        self.feats.append(r.aux[:OP.columns_needed(r.prompt_len, n)].clone())
        self.lens.append(r.prompt_len)
        self.budgets.append(n)
        if len(self.feats) - self.done >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        a = self.done
        if a == len(self.feats):
            return
        m = OP.match_lengths(self.drafter, self.ids[a:], self.feats[a:], self.lens[a:],
                             self.budgets[a:], self.depth, batch_size=self.batch_size)
        self.matches.extend(m)
        self.feats[a:] = [None] * (len(self.feats) - a)      # features are not needed again
        self.done = len(self.feats)

    def finish(self, eos_token_id) -> OP.ChainRun:
        self.flush()
        return OP.chain_run(self.matches, self.ids, self.lens, self.depth, self.budgets, eos_token_id)


def check_layers(drafter, recording: Recording) -> list[str]:
    """The drafter's aux layer ids must be the recorded ones; a recording cannot re-capture."""
    rec_ids, notes = recording.layer_ids, []
    want = drafter.config.aux_layer_ids
    if rec_ids is None:
        notes.append("recording does not state its layer ids; only the width is checked")
        return notes
    if want is None:
        want = list(eagle3_layers(int(recording.meta["num_layers"])))
        notes.append(f"drafter has no layer ids; EAGLE default {want} for a "
                     f"{recording.meta['num_layers']}-layer target")
    if sorted(want) != sorted(rec_ids):
        raise RecordingError(f"{recording.path}: recorded HF layer ids {rec_ids}, but the drafter "
                             f"reads {sorted(want)}; record again with the drafter's ids")
    return notes


def greedy_agreement(rec: Record, lm_head: torch.Tensor) -> tuple[int, int]:
    """(positions where the record's next token is the target's argmax, positions checked), from
    the recorded final (post-norm) states and the target's `lm_head` (V, H): tells whether
    teacher-forced text is the target's own greedy output."""
    P, T = rec.prompt_len, min(rec.final.shape[0], rec.input_ids.numel() - 1)
    logits = rec.final[P - 1:T].float() @ lm_head.float().T             # (T-P+1, V)
    return int((logits.argmax(-1) == rec.input_ids[P:T + 1]).sum()), T - P + 1


def replay(drafter, recording, depth: int = 4, max_new_tokens: int | None = None,
           eos_token_id=None, progress: bool = True, lm_head: torch.Tensor | None = None,
           one_pass: bool = True, batch_size: int = 16) -> ReplayResult:
    """Replay every record of `recording` (a path or `Recording`) at `depth`. `max_new_tokens`
    defaults to the recorded budget (our format) or to what each teacher-forced record holds.
    With the target's `lm_head` (e.g. `TargetParts(dir).lm_head()`), teacher-forced records that
    carry final states are checked against the target's greedy choice: where the text is the
    target's greedy output everywhere, τ is exact rather than an estimate."""
    rec = recording if isinstance(recording, Recording) else Recording(recording)
    notes = check_layers(drafter, rec)
    if rec.teacher_forced:
        notes.append("features are teacher-forced on dataset text: tau is an ESTIMATE")
    elif depth > int(rec.meta["lookahead"]):
        raise RecordingError(f"{rec.path}: recorded with lookahead {rec.meta['lookahead']}; depth "
                             f"{depth} needs lookahead >= depth (record again with --lookahead {depth})")
    budget = max_new_tokens or rec.meta.get("max_new_tokens")
    if eos_token_id is None:
        eos_token_id = rec.meta.get("eos_token_id")
    t0 = time.perf_counter()
    stats, agree, checked, missing_final = [], 0, 0, 0
    batch = OnePassBatch(drafter, depth, batch_size) if one_pass else None
    for r in tqdm(rec, total=len(rec), desc=f"replay k={depth}", disable=not progress, leave=False):
        avail = r.input_ids.numel() - r.prompt_len - depth     # tokens a depth-k replay can verify
        n = min(budget, avail) if (budget and rec.teacher_forced) else (budget or avail)
        if n < 1:
            raise RecordingError(f"{rec.path}: record {r.name} has {avail + depth} tokens after its "
                                 f"prompt, too few for depth {depth}")
        if batch is None:
            stats.append(replay_record(drafter, r, depth, n, eos_token_id))
        else:
            batch.add(r, n)
        if rec.teacher_forced and lm_head is not None:
            if r.final is None:
                missing_final += 1
            else:
                a, c = greedy_agreement(r, lm_head)
                agree, checked = agree + a, checked + c
    metrics = None
    if batch is not None:
        run = batch.finish(eos_token_id)
        stats, metrics = run.stats, run.metrics
        notes.append(f"computed by one pass ({depth} drafter steps over every position)")
    estimate = rec.teacher_forced
    if checked:
        notes.append(f"dataset text is the target's greedy token at {agree}/{checked} positions "
                     f"({agree / checked:.1%}) of {len(stats) - missing_final} records")
        if agree == checked and not missing_final:
            estimate = False
            notes.append("so these teacher-forced features are the target's greedy output: tau is exact")
    setting = {"depth": depth, "max_new_tokens": budget or "all recorded", "recording": str(rec.path),
               "target": rec.meta.get("target"), "layer_ids_hf": rec.layer_ids,
               "source": rec.meta.get("source")}
    return ReplayResult(setting, stats, metrics or from_stats(stats), estimate,
                        time.perf_counter() - t0, notes,
                        OP.COMPUTED_BY if batch is not None else "live loop (step by step)")
