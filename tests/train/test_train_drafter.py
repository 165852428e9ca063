"""The drafter's training forward (training-time test) computes exactly what inference computes."""
import torch

from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.drafter import Eagle3Drafter
from eagle_nb.train.drafter import build_vocab_map, ttt_forward, ttt_loss


def _drafter(seed=0, **flags):
    torch.manual_seed(seed)
    cfg = DrafterConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=64, vocab_size=100, draft_vocab_size=100,
                        aux_layer_ids=[2, 4, 5], **flags)
    d = Eagle3Drafter(cfg)
    for p in d.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return d


def test_ttt_step0_equals_first_draft_step():
    """TTT step 0 over all positions equals drafter(ids shifted by one, target features)."""
    d = _drafter()
    ids, feats = torch.randint(0, 100, (2, 12)), torch.randn(2, 8, 96)
    outs = ttt_forward(d, ids, feats, 3)
    ref, _ = d(ids[:, 1:9], feats)
    torch.testing.assert_close(outs[0], ref, rtol=1e-5, atol=1e-5)


def test_ttt_step_j_equals_cached_chain_drafting():
    """Column t of TTT step j equals chain drafting at inference: a KV cache holding the
    target-fed prefix 0..t, then j cached draft steps on the drafter's own states, with the same
    (teacher-forced) input tokens and positions t+j. Checked for every column and step, and with
    the norm_output / norm_before_residual variants."""
    for flags in ({}, {"norm_output": True}, {"norm_before_residual": True}):
        d = _drafter(1, **flags)
        T, S = 7, 4
        ids, feats = torch.randint(0, 100, (1, T + S + 1)), torch.randn(1, T, 96)
        outs = ttt_forward(d, ids, feats, S)
        for t in range(T):
            cache = d.new_cache(1, 64)
            logits, h = d.step(ids[:, 1:t + 2], d.fuse(feats[:, :t + 1]), cache, 0)
            cache.advance(t + 1)
            h = h[:, -1:]
            for j in range(1, S):
                logits, h = d.step(ids[:, t + 1 + j:t + 2 + j], h, cache, t + j)
                cache.advance(t + j + 1)
                torch.testing.assert_close(logits[0, 0], outs[j][0, t], rtol=1e-5, atol=1e-5)


def test_vocab_map_is_top_frequency_sorted_offsets():
    """d2t/t2d as the public builders make them: top-Vd ids by count (ties by lower id), sorted,
    d2t = id - index (offsets, non-decreasing, >= 0), t2d marks exactly those ids."""
    tokens = torch.tensor([5, 5, 5, 9, 9, 2, 7, 7, 7, 7, 0])
    d2t, t2d, cov = build_vocab_map(tokens, vocab_size=12, draft_vocab_size=3)
    selected = torch.arange(3) + d2t
    assert selected.tolist() == [5, 7, 9]
    assert d2t.dtype == torch.int64 and (d2t >= 0).all() and (d2t[1:] >= d2t[:-1]).all()
    assert t2d.nonzero().flatten().tolist() == [5, 7, 9]
    assert abs(cov - 9 / 11) < 1e-6


def test_ttt_loss_masks_unreachable_positions():
    """A position whose target argmax lies outside the draft vocab does not contribute to the
    loss (EAGLE's position mask); a reachable position does."""
    torch.manual_seed(0)
    t2d = torch.zeros(100, dtype=torch.bool)
    t2d[:50] = True                                       # draft vocab = target ids 0..49
    target = torch.randn(1, 6, 100)
    target[0, 1, 80] = 50.0                               # column 0 predicts id 80: unreachable
    target[0, 2, 10] = 50.0                               # column 1 predicts id 10: reachable
    draft = torch.randn(1, 4, 50)
    base, _ = ttt_loss([draft], target, t2d, 4)
    moved0, moved1 = draft.clone(), draft.clone()
    moved0[0, 0] += torch.randn(50) * 5
    moved1[0, 1] += torch.randn(50) * 5
    assert torch.allclose(ttt_loss([moved0], target, t2d, 4)[0], base)
    assert not torch.allclose(ttt_loss([moved1], target, t2d, 4)[0], base)


def test_diagonal_layout_equals_the_dense_mask():
    """The training-time test's default layout (causal block + one diagonal term per step, no
    mask) gives the dense-mask reference's logits and gradients, from every column and from a
    later first column, with grouped-query heads."""
    from eagle_nb.model.ttt import ttt_steps
    for first in (0, 3):
        d = _drafter(2)
        ids, feats = torch.randint(0, 100, (3, 14)), torch.randn(3, 9, 96)
        grads = []
        outs = {}
        for layout in ("dense", "diagonal"):
            d.zero_grad()
            o = list(ttt_steps(d, ids, d.fuse(feats), 5, first=first, layout=layout))
            sum((x.float() ** 2).mean() for x in o).backward()
            outs[layout] = o
            grads.append({n: p.grad.clone() for n, p in d.named_parameters() if p.grad is not None})
        for a, b in zip(outs["dense"], outs["diagonal"]):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        for n in grads[0]:
            torch.testing.assert_close(grads[0][n], grads[1][n], rtol=1e-4, atol=1e-5, msg=n)
