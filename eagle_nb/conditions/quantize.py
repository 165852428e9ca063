"""Weight-only round-to-nearest (RTN) quantization of a target's linear layers, simulated: each
weight is quantized to a signed integer grid and stored back dequantized in its own dtype, so the
copy runs as a stock HF model whose outputs are what an int8 / int4 weight-only kernel computes
(up to accumulation order). Used by the `target-quantized` serving condition
(docs/conditions.md, "Quantized target").

The grid: symmetric, per output channel (int8: one scale per row) or per group of `group_size`
consecutive input columns of a row (int4: groups of 32, the block size of llama.cpp's Q4_0/Q4_1),
scale = max|w| / qmax, q = clamp(round(w / scale), -qmax - 1, qmax), qmax = 2^(bits-1) - 1.
`q4_1` is llama.cpp's Q4_1 as `quantize_row_q4_1_ref` writes it (ggml/src/ggml-quants.c): blocks of
32 consecutive input columns, d = (max - min) / 15, q = min(15, trunc((w - min) / d + 0.5)), and the
block stored as fp16 d and fp16 min, so the weights a llama.cpp Q4_1 file holds are q * d + min with
d and min rounded to fp16; `quantize_q4_1` runs the target on those dequantized weights.
Every `nn.Linear` of the model is quantized except the output head (`lm_head`); embeddings are
`nn.Embedding` and stay as they are. A layer whose input width the block or group size does not
divide is refused, naming the layer (no layer is left unquantized without a word). NOTE: with tied embeddings, quantizing the head
(`include_lm_head=True`) quantizes the input embedding too (one tensor).

Knows torch modules; nothing about drafters or the loop.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch
from torch import nn

DEFAULT_GROUP = {8: None, 4: 32}       # bits -> group size used when none is given (None: per row)
Q4_1_BLOCK = 32                        # llama.cpp QK4_1
SCHEMES = ("int8", "int4", "q4_1")     # what `quantize` takes (the `target-quantized` conditions)


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


def q4_1(w: torch.Tensor) -> torch.Tensor:
    """`w` (out, in) as llama.cpp's Q4_1 stores it, dequantized back to its dtype (module docstring)."""
    out_f, in_f = w.shape
    if in_f % Q4_1_BLOCK:
        raise ValueError(f"Q4_1 blocks of {Q4_1_BLOCK} do not divide the {in_f} input columns")
    x = w.detach().float().reshape(out_f, in_f // Q4_1_BLOCK, Q4_1_BLOCK)
    lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
    d = (hi - lo) / 15
    inv = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    q = torch.clamp(torch.trunc((x - lo) * inv + 0.5), max=15)
    deq = q * d.half().float() + lo.half().float()
    return deq.reshape(out_f, in_f).to(w.dtype)


@dataclass
class QuantInfo:
    bits: int
    group_size: int | None           # None: one scale per output channel
    layers: list = field(default_factory=list)          # names of the quantized linear layers
    rel_error: float = 0.0           # ||W_q - W|| / ||W|| over every quantized weight

    scheme: str = ""                 # "q4_1" for llama.cpp's Q4_1; empty: symmetric RTN

    def describe(self) -> str:
        g = "per output channel" if self.group_size is None else f"groups of {self.group_size}"
        what = (f"llama.cpp Q4_1 (blocks of {Q4_1_BLOCK}, fp16 scale and min), dequantized"
                if self.scheme == "q4_1" else f"int{self.bits} weight-only RTN, symmetric, {g}")
        return (f"{what}, {len(self.layers)} linear layers "
                f"(lm_head and embeddings kept), relative weight error {self.rel_error:.4f}")


@torch.no_grad()
def quantize_rtn(model: nn.Module, bits: int = 4, group_size: int | None = -1,
                 include_lm_head: bool = False) -> tuple[nn.Module, QuantInfo]:
    """A deep copy of `model` with its linear layers RTN-quantized (dequantized weights). Returns
    (copy, QuantInfo). `group_size=-1` takes DEFAULT_GROUP[bits] (int8: per row; int4: 32)."""
    g = DEFAULT_GROUP.get(bits) if group_size == -1 else group_size
    return _quantized_copy(model, lambda w: rtn(w, bits, g), QuantInfo(bits, g), include_lm_head)


@torch.no_grad()
def quantize_q4_1(model: nn.Module, include_lm_head: bool = False) -> tuple[nn.Module, QuantInfo]:
    """A deep copy of `model` with its linear layers as llama.cpp's Q4_1 dequantizes them."""
    return _quantized_copy(model, q4_1, QuantInfo(4, Q4_1_BLOCK, scheme="q4_1"), include_lm_head)


def quantize(model: nn.Module, scheme: str) -> tuple[nn.Module, QuantInfo]:
    """`scheme` (one of SCHEMES) applied to a deep copy of `model`: (copy, QuantInfo)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quantization {scheme!r}; choose from {list(SCHEMES)}")
    return quantize_q4_1(model) if scheme == "q4_1" else quantize_rtn(model, int(scheme[3:]))


def _quantized_copy(model, fn, info: QuantInfo, include_lm_head: bool):
    out = copy.deepcopy(model)
    head = out.get_output_embeddings() if hasattr(out, "get_output_embeddings") else None
    err = norm = 0.0
    for name, mod in out.named_modules():
        if not isinstance(mod, nn.Linear) or (mod is head and not include_lm_head):
            continue
        w = mod.weight
        try:
            wq = fn(w)
        except ValueError as e:
            raise ValueError(f"{type(model).__name__} layer {name} ({tuple(w.shape)}) cannot be "
                             f"quantized this way: {e}") from None
        err += float((wq.float() - w.float()).pow(2).sum())
        norm += float(w.float().pow(2).sum())
        w.copy_(wq)
        info.layers.append(name)
    if not info.layers:
        raise ValueError(f"{type(model).__name__} has no nn.Linear layer to quantize")
    info.rel_error = (err / norm) ** 0.5 if norm else 0.0
    return out.eval(), info
