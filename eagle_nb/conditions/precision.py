"""A target served at lower precision than the states its drafter was trained on, measured: what
changes between the pair and the pair under a `target-quantized*` condition (registry.py;
docs/conditions.md, "Quantized target").

Under the condition the pair runs a quantized copy of its target (quantize.py; built once per pair
and shared with `compare_precision` through the pair's `builds`), so every `Pair.run` path (the one
pass at T = 0, the live loop otherwise) measures the quantized target as a server would run it: its
own greedy continuation, its own aux states. `compare_precision` reports, over the reference
target's greedy continuations of the prompts (teacher-forced through both targets):

- `aux_cosine[layer]`: mean over fed positions of cos(h_ref, h_quant) of each captured aux state;
- `top1_agreement`: share of continuation positions (those predicting a continuation token) where
  the two targets' argmax agree;
- tau (and per-position acceptance) of the pair with and without the condition, by `Pair.run` at
  T = 0.

Knows the Pair's attributes (target, builds, layer ids, encode, run); nothing about plots.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from eagle_nb.conditions import registry as C
from eagle_nb.conditions.condition_fns import quantized_target
from eagle_nb.loop.target_states import greedy_continuations
from eagle_nb.model.capture import capture


def scheme_of(condition: str) -> str:
    """The quantization (quantize.SCHEMES) a `target-quantized*` condition runs the target at."""
    scheme = getattr(C.entry(condition).apply, "scheme", None)
    if scheme is None:
        raise ValueError(f"condition {condition!r} does not quantize the target; choose from "
                         f"{[c.name for c in C.REGISTRY if c.family == C.PRECISION]}")
    return scheme


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


def compare_precision(pair, prompts, condition: str = "target-quantized", depth: int = 4,
                      max_new_tokens: int = 32) -> PrecisionReport:
    """tau of `pair` and of the pair under `condition` (a `target-quantized*` entry) at T = 0, with
    the aux states' cosine and the top-1 agreement between the two targets on the reference
    continuations."""
    qtarget, info = quantized_target(pair.builds, scheme_of(condition))
    ref = pair.run(prompts, depth=depth, max_new_tokens=max_new_tokens, progress=False)
    quant = pair.run(prompts, depth=depth, max_new_tokens=max_new_tokens, conditions=(condition,),
                     progress=False)
    ids = [pair.encode(p) for p in prompts]
    seqs = greedy_continuations(pair.target, ids, max_new_tokens)
    cos, top1, n = state_agreement(pair.target, qtarget, seqs, [x.shape[-1] for x in ids],
                                   pair.layer_ids)
    return PrecisionReport(info.describe(), depth, ref.metrics.accept_length,
                           quant.metrics.accept_length, ref.metrics.per_position_acceptance,
                           quant.metrics.per_position_acceptance, cos, top1, n, info.rel_error)
