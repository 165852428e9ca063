"""One-pass greedy acceptance (loop/onepass.py) equals the live loop: accept counts and committed
tokens, prompt by prompt, at every depth 1..8, for the healthy pair and every switchable fault of
the registry; stopping at max_new_tokens and EOS as the live loop stops; results say which
computed them.

Float ties: the one pass computes the same drafts as the live loop up to floating-point summation
order (one batched pass vs cached chunks; the target's states from one forward vs verify chunks).
An argmax can only flip where the top-2 margin is of that order, so a prompt may differ from the
live loop only if its walk used a draft decision with a margin under `onepass.NEAR_TIE` (1e-4
in logits; float32 summation-order differences are orders of magnitude smaller). The default test
allows none; the slow test names any it meets and prints the smallest margin used.
"""
from __future__ import annotations

import pytest
import torch
from helpers import tiny_drafter, tiny_features

from eagle_nb.experiment import faults as F
from helpers import code_pair, code_prompts
from eagle_nb.experiment.setting import Setting
from eagle_nb.loop import onepass as OP
from eagle_nb.loop import target_states as TS
from eagle_nb.loop.chain import generate
from eagle_nb.model.capture import capture
from eagle_nb.model.ttt import ttt_steps

SWITCHES = [None] + [f.name for f in F.FAULTS]


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def test_ttt_steps_from_a_first_column_equal_the_full_layout():
    """Later TTT steps computed only from column `first` on equal the full layout's columns."""
    d = tiny_drafter()
    ids, feats = tiny_features(d, B=2, T=11)
    T = 8
    g = d.fuse(feats[:, :T])
    with torch.no_grad():
        full = list(ttt_steps(d, ids, g, 3))
        part = list(ttt_steps(d, ids, g, 3, first=5))
    torch.testing.assert_close(part[0], full[0])
    for a, b in zip(part[1:], full[1:]):
        torch.testing.assert_close(a, b[:, 5:], rtol=1e-5, atol=1e-5)


def _live(pair, x, k, n, eos):
    return generate(pair.target, pair.drafter, x, depth=k, max_new_tokens=n,
                    layer_ids=pair.layer_ids, eos_token_id=eos)[1]


def test_walk_stops_where_the_live_loop_stops(pair):
    """EOS as the prefill token, as a bonus or among accepted drafts, and budgets of 1 and 13
    tokens: the one pass's accept counts and tokens equal chain.generate's at depths 1..8."""
    x = pair.encode(code_prompts(1)[0])
    st = TS.from_target(pair.target, [x], 13 + 8)
    feats = st.features("aux", pair.layer_ids)
    cont = st.ids[0][st.prompt_lens[0]:].tolist()
    for eos, n in ((None, 1), (None, 13), (cont[0], 13), (cont[3], 13), (cont[6], 13), (cont[9], 13)):
        m = OP.match_lengths(pair.drafter, st.ids, feats, st.prompt_lens, n, 8)
        for k in range(1, 9):
            live = _live(pair, x, k, n, eos)
            got = OP.walk(m.lengths(0), st.ids[0], st.prompt_lens[0], k, n, eos)
            assert (got.accept_counts, got.tokens) == (live.accept_counts, live.tokens), (eos, n, k)


def _compare(pair, prompts, n, depths=range(1, 9), switches=SWITCHES):
    """Pair.run by one pass and by the live loop, every switch x depth; returns the smallest draft
    margin the one pass used, the number of (switch, depth, prompt) compared and the list of those
    that differed at a near-tie (tolerated, named)."""
    low, compared, tolerated = float("inf"), 0, []
    for name in switches:
        for k in depths:
            s = Setting(faults=() if name is None else (name,), depth=k, max_new_tokens=n)
            outs = []
            for one in (True, False):
                pair.use_one_pass = one
                try:
                    outs.append(pair.run(prompts, s, progress=False))
                except ValueError as e:            # NotApplicable, bad ids: same error both ways
                    outs.append(e)
            pair.use_one_pass = True
            a, b = outs
            if isinstance(a, Exception) or isinstance(b, Exception):
                assert type(a) is type(b) and str(a) == str(b), (name, a, b)
                break
            assert a.computed_by == "one-pass" and b.computed_by == "live loop"
            chain = pair.one_pass.chain(tuple(prompts), s)[3]
            tied = {t[0] for t in chain.near_ties}
            low = min([low] + [w.min_margin for w in chain.walks])
            for i, (x, y) in enumerate(zip(a.stats, b.stats)):
                same = (x.accept_counts, x.tokens) == (y.accept_counts, y.tokens)
                assert same or i in tied, (name, k, i, x.accept_counts, y.accept_counts)
                compared += 1
                tolerated += [] if same else [(name, k, i)]
            assert a.outputs == b.outputs or tied, (name, k)
            assert a.metrics.accept_length == b.metrics.accept_length or tied, (name, k)
    return low, compared, tolerated


def test_one_pass_equals_live_loop_every_fault_every_depth(pair):
    """A shipped prompt x 12 tokens (the slow test: all 16 x 64): for the healthy pair and every
    switchable fault (or the same NotApplicable/ValueError both ways), depths 1..8, accept counts,
    tokens, outputs and tau equal."""
    _, n, tolerated = _compare(pair, code_prompts(1), 12)
    assert n >= 8 * 10 and not tolerated, (n, tolerated)


@pytest.mark.slow
def test_one_pass_equals_live_loop_all_code_prompts(pair):
    """All 16 shipped prompts x 64 tokens, every switch, depths 1..8 (the issue's full check)."""
    low, n, tolerated = _compare(pair, code_prompts(), 64)
    print(f"compared {n} (switch, depth, prompt) runs; smallest draft margin used {low:.3g}; "
          f"differing at a near-tie: {tolerated}")


def test_results_say_which_loop_computed_them(pair):
    """Greedy chains come from the one pass (outputs decoded, no timings, acc_j present), T > 0
    chains from the sampled one pass; trees and reference checks from the live loop, which also equals it on the same greedy chain."""
    prompts = code_prompts(2)
    one = pair.run(prompts, depth=3, max_new_tokens=10, progress=False)
    assert one.computed_by == "one-pass" and one.tokens_per_s is None
    assert len(one.metrics.teacher_forced_accuracy) == 3 and one.summary()["computed_by"] == "one-pass"
    checked = pair.run(prompts, depth=3, max_new_tokens=10, check_reference=True, progress=False)
    assert checked.computed_by == "live loop" and checked.matches_target_greedy
    assert checked.outputs == one.outputs and checked.metrics.accept_length == one.metrics.accept_length
    assert pair.run(prompts, depth=3, max_new_tokens=10, temperature=1.0,
                    progress=False).computed_by != "live loop"     # in expectation, by default
    assert pair.run(prompts, depth=2, topk=2, max_new_tokens=10,
                    progress=False).computed_by == "live loop"


def test_teacher_forced_step1_accuracy_is_the_plain_forward_hit_rate(pair):
    """acc_1 is the fraction of committed positions where the drafter's plain first-step forward
    (Eagle3Drafter.forward on captured features) predicts the next committed token."""
    prompts = code_prompts(3)
    r = pair.run(prompts, depth=4, max_new_tokens=20, progress=False)
    hits = tried = 0
    for p, st in zip(prompts, r.stats):
        x = pair.encode(p)
        seq = torch.cat([x[0], torch.tensor(st.tokens)])
        with torch.no_grad(), capture(pair.target, pair.layer_ids) as cap:
            pair.target(input_ids=seq[None, :-1])
            logits, _ = pair.drafter(seq[None, 1:], cap.fused())
        T0 = x.shape[1]
        pred = pair.drafter.draft_to_target(logits[0].argmax(-1))    # column t predicts t + 2
        got = pred[T0 - 1:len(seq) - 2] == seq[T0 + 1:]
        hits, tried = hits + int(got.sum()), tried + got.numel()
    assert r.metrics.teacher_forced_accuracy[0] == pytest.approx(hits / tried)
