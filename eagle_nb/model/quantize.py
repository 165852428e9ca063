"""Weight-only round-to-nearest (RTN) quantization of a target's linear layers, simulated: each
weight is quantized to a signed integer grid and stored back dequantized in its own dtype, so the
copy runs as a stock HF model whose outputs are what an int8 / int4 weight-only kernel computes
(up to accumulation order). Used by the `target-quantized` serving condition
(docs/conditions.md, "Quantized target").

The grid: symmetric, per output channel (int8: one scale per row) or per group of `group_size`
consecutive input columns of a row (int4: groups of 32, the block size of llama.cpp's Q4_0/Q4_1),
scale = max|w| / qmax, q = clamp(round(w / scale), -qmax - 1, qmax), qmax = 2^(bits-1) - 1.
Every `nn.Linear` of the model is quantized except the output head (`lm_head`); embeddings are
`nn.Embedding` and stay as they are. NOTE: with tied embeddings, quantizing the head
(`include_lm_head=True`) quantizes the input embedding too (one tensor).

Knows torch modules; nothing about drafters or the loop.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn

DEFAULT_GROUP = {8: None, 4: 32}       # bits -> group size used when none is given (None: per row)


def rtn(w: torch.Tensor, bits: int, group_size: int | None = None) -> torch.Tensor:
    """`w` (out, in) quantized to `bits` symmetric RTN and dequantized back to its dtype; scales per
    row, or per `group_size` columns of a row."""
    if bits not in (2, 3, 4, 5, 6, 7, 8):
        raise ValueError(f"bits must be in 2..8, got {bits}")
    out_f, in_f = w.shape
    g = in_f if group_size is None else group_size
    if g < 1 or in_f % g:
        raise ValueError(f"group size {group_size} does not divide the {in_f} input columns")
    qmax = 2 ** (bits - 1) - 1
    x = w.detach().float().reshape(out_f, in_f // g, g)
    scale = (x.abs().amax(-1, keepdim=True) / qmax).clamp(min=torch.finfo(torch.float32).tiny)
    q = torch.round(x / scale).clamp(-qmax - 1, qmax)
    return (q * scale).reshape(out_f, in_f).to(w.dtype)


@dataclass
class QuantInfo:
    bits: int
    group_size: int | None           # None: one scale per output channel
    layers: list = field(default_factory=list)          # names of the quantized linear layers
    rel_error: float = 0.0           # ||W_q - W|| / ||W|| over every quantized weight

    def describe(self) -> str:
        g = "per output channel" if self.group_size is None else f"groups of {self.group_size}"
        return (f"int{self.bits} weight-only RTN, symmetric, {g}, {len(self.layers)} linear layers "
                f"(lm_head and embeddings kept), relative weight error {self.rel_error:.4f}")


@torch.no_grad()
def quantize_rtn(model: nn.Module, bits: int = 4, group_size: int | None = -1,
                 include_lm_head: bool = False) -> tuple[nn.Module, QuantInfo]:
    """A deep copy of `model` with its linear layers RTN-quantized (dequantized weights). Returns
    (copy, QuantInfo). `group_size=-1` takes DEFAULT_GROUP[bits] (int8: per row; int4: 32)."""
    g = DEFAULT_GROUP.get(bits) if group_size == -1 else group_size
    out = copy.deepcopy(model)
    head = out.get_output_embeddings() if hasattr(out, "get_output_embeddings") else None
    info = QuantInfo(bits, g)
    err = norm = 0.0
    for name, mod in out.named_modules():
        if not isinstance(mod, nn.Linear) or (mod is head and not include_lm_head):
            continue
        w = mod.weight
        wq = rtn(w, bits, g)
        err += float((wq.float() - w.float()).pow(2).sum())
        norm += float(w.float().pow(2).sum())
        w.copy_(wq)
        info.layers.append(name)
    if not info.layers:
        raise ValueError(f"{type(model).__name__} has no nn.Linear layer to quantize")
    info.rel_error = (err / norm) ** 0.5 if norm else 0.0
    return out.eval(), info
