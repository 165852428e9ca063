"""Weight-only RTN quantization (eagle_nb.conditions.quantize): the grid and its error bound on hand
tensors, and on a tiny Llama which layers a copy quantizes and which it keeps."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from eagle_nb.conditions.quantize import q4_1, quantize, quantize_rtn, rtn
from helpers import tiny_llama


def test_rtn_is_symmetric_per_row_or_group_with_half_step_error():
    """Every dequantized value is an integer multiple of its row's (or group's) scale
    max|w| / qmax, within half a step of the original; the largest magnitude is exact; int4 in
    groups of 4 uses at most 16 levels per group."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 16, generator=g)
    for bits, group in ((8, None), (4, None), (4, 4)):
        qmax = 2 ** (bits - 1) - 1
        wq = rtn(w, bits, group)
        blocks = w.reshape(6, -1, group or 16)
        scale = blocks.abs().amax(-1, keepdim=True) / qmax
        steps = wq.reshape(blocks.shape) / scale
        assert torch.allclose(steps, steps.round(), atol=1e-4)
        assert ((wq.reshape(blocks.shape) - blocks).abs() <= scale / 2 + 1e-6).all()
        top = blocks.abs().argmax(-1, keepdim=True)
        assert torch.allclose(wq.reshape(blocks.shape).gather(-1, top), blocks.gather(-1, top))
        assert steps.round().unique().numel() <= 2 ** bits
    assert (rtn(w, 8) - w).norm() < (rtn(w, 4, 4) - w).norm() < (rtn(w, 4) - w).norm()


def test_rtn_refuses_what_it_cannot_do():
    """A group that does not divide the columns, or a bit width outside 2..8."""
    with pytest.raises(ValueError, match="does not divide the 10"):
        rtn(torch.ones(2, 10), 4, 4)
    with pytest.raises(ValueError, match="bits"):
        rtn(torch.ones(2, 8), 16)


def test_quantize_rtn_copies_and_keeps_head_and_embeddings():
    """The copy quantizes every decoder linear (7 per layer) and keeps lm_head and the embedding;
    the original model is untouched; int8 errs less than int4; the defaults are int8 per row and
    int4 in groups of 32; the head can be included."""
    model = tiny_llama(num_layers=2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    q8, i8 = quantize_rtn(model, 8)
    q4, i4 = quantize_rtn(model, 4)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert len(i8.layers) == 14 and "lm_head" not in i8.layers
    assert (i8.group_size, i4.group_size) == (None, 32) and i8.rel_error < i4.rel_error
    sd = q4.state_dict()
    assert torch.equal(sd["lm_head.weight"], before["lm_head.weight"])
    assert torch.equal(sd["model.embed_tokens.weight"], before["model.embed_tokens.weight"])
    assert not torch.equal(sd["model.layers.0.self_attn.q_proj.weight"],
                           before["model.layers.0.self_attn.q_proj.weight"])
    assert "groups of 32" in i4.describe() and "per output channel" in i8.describe()
    _, ih = quantize_rtn(model, 4, include_lm_head=True)
    assert "lm_head" in ih.layers
    with pytest.raises(ValueError, match="no nn.Linear"):
        quantize_rtn(nn.Sequential(nn.ReLU()), 8)


def test_q4_1_is_llama_cpp_blocks_of_32_with_fp16_scale_and_min():
    """Each block of 32 holds at most 16 levels, its minimum is kept to fp16 precision, every value
    is within half a step (d = (max - min) / 15) of the original plus the fp16 rounding of d and
    min, and the same weights reproduce llama.cpp's reference rounding (trunc(x + 0.5)) by hand."""
    g = torch.Generator().manual_seed(1)
    w = torch.randn(4, 64, generator=g)
    wq = q4_1(w)
    blocks, qb = w.reshape(4, 2, 32), wq.reshape(4, 2, 32)
    lo, hi = blocks.amin(-1, keepdim=True), blocks.amax(-1, keepdim=True)
    d = (hi - lo) / 15
    assert all(qb[i, j].unique().numel() <= 16 for i in range(4) for j in range(2))
    assert torch.allclose(qb.amin(-1, keepdim=True), lo.half().float(), atol=1e-6)
    assert ((qb - blocks).abs() <= d / 2 + 16 * (d - d.half().float()).abs() + 2e-3).all()
    x = w[0, :32]
    dd = float((x.max() - x.min()) / 15)
    q = [min(15, int((float(v) - float(x.min())) / dd + 0.5)) for v in x]
    hand = torch.tensor(q) * torch.tensor(dd).half().float() + x.min().half().float()
    assert torch.allclose(wq[0, :32], hand, atol=1e-6)


def test_quantize_names_the_scheme_and_refuses_what_the_layers_do_not_allow():
    """`quantize` takes int8, int4 and q4_1 and describes each; an unknown scheme, and a target
    whose linear layers' width the block size does not divide, are refused naming the layer."""
    model = tiny_llama(num_layers=2)
    _, info = quantize(model, "q4_1")
    assert "Q4_1" in info.describe() and len(info.layers) == 14
    assert "int8" in quantize(model, "int8")[1].describe()
    with pytest.raises(ValueError, match="unknown quantization 'int3'"):
        quantize(model, "int3")
    odd = nn.Sequential(nn.Linear(20, 8))
    with pytest.raises(ValueError, match=r"layer 0 \(\(8, 20\)\).*blocks of 32 do not divide the 20"):
        quantize(odd, "q4_1")
    with pytest.raises(ValueError, match=r"layer 0 .*group size 32 does not divide the 20"):
        quantize(odd, "int4")
