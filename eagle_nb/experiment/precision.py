"""A target served at lower precision than the states its drafter was trained on: the pair with an
RTN-quantized copy of its target (model/quantize.py), and what changes between the two precisions
(docs/conditions.md, "Quantized target").

`quantized_pair(pair, bits)` is a view of a loaded `Pair` whose target is the quantized copy (same
drafter, tokenizer and settings; its own result caches), so every `Pair.run` path (the one pass at
T = 0, the live loop otherwise) measures the quantized target as a server would run it: its own
greedy continuation, its own aux states. `compare_precision` reports, over the reference target's
greedy continuations of the prompts (teacher-forced through both targets):

- `aux_cosine[layer]`: mean over fed positions of cos(h_ref, h_quant) of each captured aux state;
- `top1_agreement`: share of continuation positions (those predicting a continuation token) where
  the two targets' argmax agree;
- tau (and per-position acceptance) of the pair at each precision, by `Pair.run` at T = 0.

Knows the Pair's attributes (target, drafter, tokenizer, layer ids, encode); nothing about plots.
"""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import torch

from eagle_nb.experiment.onepass_runs import OnePass
from eagle_nb.experiment.setting import Setting
from eagle_nb.experiment.wiring import Builds
from eagle_nb.loop.target_states import greedy_continuations
from eagle_nb.model.capture import capture
from eagle_nb.model.quantize import quantize_rtn


def quantized_pair(pair, bits: int = 4, group_size: int | None = -1, include_lm_head: bool = False):
    """A view of `pair` with an RTN-quantized copy of its target (`quantize_rtn`'s defaults: int8
    per output channel, int4 in groups of 32). `.quant_info` says what was quantized."""
    target, info = quantize_rtn(pair.target, bits, group_size, include_lm_head)
    q = copy.copy(pair)
    q.target, q.quant_info = target, info
    q.target_path = f"{pair.target_path or 'shipped'} ({info.describe()})"
    q.builds = Builds(target, pair.drafter, pair.speculators_path, pair.num_layers)
    q._cache = {}
    q.one_pass = OnePass(q)
    return q


@dataclass
class PrecisionReport:
    precision: str                   # QuantInfo.describe()
    depth: int
    tau_reference: float
    tau_quantized: float
    per_position_reference: list
    per_position_quantized: list
    aux_cosine: dict                 # HF layer id -> mean cosine over fed positions
    top1_agreement: float            # over continuation positions
    positions: int                   # continuation positions compared
    weight_rel_error: float

    def as_dict(self) -> dict:
        return asdict(self)

    def report_lines(self) -> list[str]:
        cos = ", ".join(f"layer {k}: {v:.4f}" for k, v in self.aux_cosine.items())
        return [f"target at {self.precision}",
                f"tau at depth {self.depth}: {self.tau_reference:.3f} reference, "
                f"{self.tau_quantized:.3f} quantized",
                f"aux states, cosine to the reference: {cos}",
                f"top-1 agreement: {100 * self.top1_agreement:.2f}% of {self.positions} positions"]


@torch.no_grad()
def state_agreement(reference, quantized, seqs, prompt_lens, layer_ids) -> tuple[dict, float, int]:
    """Teacher-forced over each sequence (1-D ids): (mean aux cosine per layer over fed positions,
    top-1 agreement over continuation positions, positions compared)."""
    dev = next(reference.parameters()).device
    cos = {int(k): [] for k in layer_ids}
    agree = total = 0
    for seq, T0 in zip(seqs, prompt_lens):
        x = seq[None, :-1].to(dev)
        outs = []
        for model in (reference, quantized):
            with capture(model, layer_ids) as st:
                logits = model(input_ids=x).logits[0]
            outs.append(({k: st[k][0].float() for k in cos}, logits[T0 - 1:].argmax(-1)))
        for k in cos:
            cos[k].append(torch.nn.functional.cosine_similarity(outs[0][0][k], outs[1][0][k], dim=-1))
        agree += int((outs[0][1] == outs[1][1]).sum())
        total += outs[0][1].numel()
    return {k: float(torch.cat(v).mean()) for k, v in cos.items()}, agree / total, total


def compare_precision(pair, prompts, bits: int = 4, group_size: int | None = -1, depth: int = 4,
                      max_new_tokens: int = 32, qpair=None) -> PrecisionReport:
    """tau of `pair` and of its `bits`-bit RTN copy (or the given `qpair`) at T = 0, with the aux
    states' cosine and the top-1 agreement between the two targets on the reference continuations."""
    qpair = qpair or quantized_pair(pair, bits, group_size)
    s = Setting(depth=depth, max_new_tokens=max_new_tokens)
    ref, quant = pair.run(prompts, s, progress=False), qpair.run(prompts, s, progress=False)
    ids = [pair.encode(p) for p in prompts]
    seqs = greedy_continuations(pair.target, ids, max_new_tokens)
    cos, top1, n = state_agreement(pair.target, qpair.target, seqs, [x.shape[-1] for x in ids],
                                   pair.layer_ids)
    info = qpair.quant_info
    return PrecisionReport(info.describe(), depth, ref.metrics.accept_length,
                           quant.metrics.accept_length, ref.metrics.per_position_acceptance,
                           quant.metrics.per_position_acceptance, cos, top1, n, info.rel_error)
