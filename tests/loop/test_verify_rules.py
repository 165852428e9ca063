"""Tests for eagle_nb.loop.verify_rules and the loop's `verify_rule`: each engine rule emits the
target's distribution (chi-square on many seeded cycles), the same check rejects rules that do
not, each rule accepts as often as its formula says, and at T = 0 every rule is plain greedy.

The pure-function checks use a context-free toy (V = 6): per position i the drafter's q_i and the
target's p_i are fixed rows, so the token a cycle emits at position j must follow p_j whatever was
drafted. The loop checks use the tiny pair of tests/helpers.py.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from scipy import stats as sps

from eagle_nb.experiment.setting import Setting
from eagle_nb.loop import verify_rules as VR
from eagle_nb.loop.chain import generate, greedy_reference
from eagle_nb.loop.metrics import acceptance_metrics
from helpers import LAYER_IDS, LOOP_V, PROMPTS, build, chisq_p, ids_of

N_CYCLES = 20000


def _dist(*rows) -> torch.Tensor:
    t = torch.tensor(rows, dtype=torch.float64)
    return t / t.sum(-1, keepdim=True)


P = _dist([4, 3, 1, 1, .5, .5], [1, 1, 3, 3, 1, 1], [.5, 2, .5, 2, 3, 2])    # target, k + 1 = 3
Q = _dist([1, 1, 3, 3, 1, 1], [3, 1, 1, 1, 2, 2])                          # drafter, k = 2


def _drafts(rule: str, q: torch.Tensor, n: int, gen) -> torch.Tensor:
    """n draft chains (n, k) as the rule drafts them: the argmax of each row, or samples."""
    if rule == VR.ARGMAX:
        return q.argmax(-1).expand(n, -1)
    return torch.stack([torch.multinomial(q[i], n, replacement=True, generator=gen)
                        for i in range(q.shape[0])], 1)


@functools.lru_cache(maxsize=None)
def _emitted(decide, rule: str, n: int = N_CYCLES, seed: int = 0):
    """Run n cycles of the toy, drafting as `rule` drafts and deciding with `decide`; return
    (counts of the token emitted at position 0, counts at position 1 among cycles that reach it,
    accepted counts). Cached: the tests of one rule share its cycles."""
    gen = torch.Generator().manual_seed(seed)
    first, second, accepted = np.zeros(6), np.zeros(6), []
    for x in _drafts(rule, Q, n, gen):
        a, tok = decide(x, Q, P, gen)
        out = x[:a].tolist() + [tok]
        first[out[0]] += 1
        if len(out) > 1:
            second[out[1]] += 1
        accepted.append(a)
    return first, second, accepted


@functools.lru_cache(maxsize=None)
def _rule(name):
    return lambda x, q, p, gen: VR.accept(name, x, q, p, gen)


# -- lossless, with power ----------------------------------------------------------------------------
@pytest.mark.parametrize("rule", VR.VERIFY_RULES)
def test_every_engine_rule_emits_the_target_distribution(rule):
    """Chi-square over 20k cycles: the token emitted at position 0 follows p_0 and the token at
    position 1 (when the cycle reaches it) follows p_1, although drafts come from q (or its argmax).
    p-values printed with -s."""
    first, second, _ = _emitted(_rule(rule), rule)
    p0, p1 = chisq_p(first, P[0]), chisq_p(second, P[1])
    print(f"{rule}: chi-square p = {p0:.3g} (position 0), {p1:.3g} (position 1, n={second.sum():.0f})")
    assert p0 > 1e-3 and p1 > 1e-3


def _argmax_drafts_full_q(x, q, p, gen):
    """A mismatched pair of choices: argmax drafts verified as if they had been sampled from q
    (min(1, p/q), residual max(p - q, 0)). q(x) < 1 makes the argmax over-accepted."""
    return VR.accept_sample(x, q, p, gen)


def _always_accept(x, q, p, gen):
    return x.numel(), int(torch.multinomial(p[x.numel()], 1, generator=gen))


@pytest.mark.parametrize("decide", [_argmax_drafts_full_q, _always_accept])
def test_the_same_check_rejects_rules_that_are_not_lossless(decide):
    """The chi-square above has power: argmax drafts judged against the full draft distribution,
    and accept-everything, emit a position-0 distribution the check rejects (p < 1e-6)."""
    first, _, _ = _emitted(decide, VR.ARGMAX, 5000)
    pv = chisq_p(first, P[0])
    print(f"{decide.__name__}: chi-square p = {pv:.3g}")
    assert pv < 1e-6


# -- how often each rule accepts ---------------------------------------------------------------------
@pytest.mark.parametrize("rule", VR.VERIFY_RULES)
def test_each_rule_accepts_as_its_formula_says(rule):
    """Position-0 acceptance over 20k cycles matches acceptance_probability (binomial test):
    argmax p(argmax q) = 0.1, sampled sum min(p, q) = 0.5, strict sum p q = 0.14."""
    _, _, accepted = _emitted(_rule(rule), rule)
    want = float(VR.acceptance_probability(rule, Q[0], P[0]))
    hits = sum(a >= 1 for a in accepted)
    assert sps.binomtest(hits, len(accepted), want).pvalue > 1e-3, (rule, hits / len(accepted), want)


def test_acceptance_formulas_by_hand():
    """The three formulas on one row, and sampled >= strict always (min(p, q) >= p q)."""
    p, q = _dist([0.5, 0.3, 0.2]), _dist([0.2, 0.7, 0.1])
    assert float(VR.acceptance_probability(VR.ARGMAX, q, p)[0]) == pytest.approx(0.3)
    assert float(VR.acceptance_probability(VR.SAMPLED, q, p)[0]) == pytest.approx(0.2 + 0.3 + 0.1)
    assert float(VR.acceptance_probability(VR.STRICT, q, p)[0]) == pytest.approx(0.1 + 0.21 + 0.02)
    g = torch.Generator().manual_seed(0)
    p, q = torch.rand(50, 9, generator=g).softmax(-1), torch.rand(50, 9, generator=g).softmax(-1)
    assert (VR.acceptance_probability(VR.SAMPLED, q, p) >= VR.acceptance_probability(VR.STRICT, q, p)).all()


def test_strict_matching_of_argmax_drafts_is_the_argmax_rule():
    """llama.cpp drafts its top candidate and matches exactly: with argmax drafts, strict accepts
    w.p. p(argmax q) and replaces from p without the draft, the argmax rule's distribution
    (acceptance: binomial test against p(argmax q); emitted tokens: chi-square against p)."""
    first, _, accepted = _emitted(_rule(VR.STRICT), VR.ARGMAX)
    want = float(VR.acceptance_probability(VR.ARGMAX, Q[0], P[0]))
    assert sps.binomtest(sum(a >= 1 for a in accepted), len(accepted), want).pvalue > 1e-3
    assert chisq_p(first, P[0]) > 1e-3


def test_accept_dispatch_checks_its_inputs():
    """An unknown rule is refused naming the known ones; `sampled` without q is refused."""
    x = torch.tensor([0])
    with pytest.raises(ValueError, match="argmax"):
        VR.accept("greedy", x, None, P[:2], torch.Generator())
    with pytest.raises(ValueError, match="needs the drafter's probabilities"):
        VR.accept(VR.SAMPLED, x, None, P[:2], torch.Generator())


# -- the loop --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rule", VR.VERIFY_RULES)
def test_greedy_output_is_plain_greedy_under_every_rule(rule):
    """T = 0: generate() under each rule emits greedy_reference's tokens (random and oracle
    drafters, depths 1 and 4; tests/loop/test_speculate.py covers the default rule in depth)."""
    prompt = PROMPTS[1]
    for kind in ("random", "oracle"):
        target, drafter = build(kind, prompt)
        ref, _ = greedy_reference(target, ids_of(prompt), 20)
        for depth in (1, 4):
            out, _ = generate(target, drafter, ids_of(prompt), depth=depth, max_new_tokens=20,
                              layer_ids=LAYER_IDS, verify_rule=rule)
            assert out == ref, (rule, kind, depth)


# Uniform target over 64 ids, uniform drafter over target ids 0..47 (its argmax: id 0).
UNIFORM_ACCEPT = {VR.ARGMAX: 1 / 64, VR.SAMPLED: 0.75, VR.STRICT: 1 / 64}


@pytest.mark.parametrize("rule", VR.VERIFY_RULES)
def test_sampled_loop_under_each_rule_is_lossless_and_accepts_as_expected(rule):
    """T = 1 on the uniform pair (both lm_heads zero): every rule emits i.i.d. uniform tokens over
    all 64 ids (chi-square), and position-0 acceptance is the rule's: argmax p(0) = 1/64, sampled
    min(1, (1/64)/(1/48)) = 0.75, strict 48 * (1/64)(1/48) = 1/64 (binomial test)."""
    target, drafter = build("agree-all", PROMPTS[0])
    counts, accept = np.zeros(LOOP_V), []
    for seed in range(3):
        out, st = generate(target, drafter, ids_of(PROMPTS[0]), depth=2, max_new_tokens=128,
                           temperature=1.0, seed=seed, layer_ids=LAYER_IDS, verify_rule=rule)
        np.add.at(counts, out, 1)
        accept += st.accept_counts
        if rule == VR.ARGMAX:
            assert all(s.draft_tokens == [0, 0] for s in st.steps)      # the argmax, every time
    pv = chisq_p(counts, np.full(LOOP_V, 1 / LOOP_V))
    m = acceptance_metrics(accept, 2)
    n = len(accept)
    print(f"{rule}: uniform chi-square p = {pv:.3g}; position-0 acceptance "
          f"{m.per_position_acceptance[0]:.3f} over {n} steps")
    assert pv > 1e-3
    assert sps.binomtest(round(m.per_position_acceptance[0] * n), n, UNIFORM_ACCEPT[rule]).pvalue > 1e-3


def test_rules_are_reproducible_per_seed():
    """The same seed and rule give the same tokens and trace; the rules draw differently."""
    target, drafter = build("random", PROMPTS[1])
    runs = {}
    for rule in (*VR.VERIFY_RULES, VR.ARGMAX):
        out, st = generate(target, drafter, ids_of(PROMPTS[1]), depth=3, max_new_tokens=16,
                           temperature=0.7, seed=3, layer_ids=LAYER_IDS, verify_rule=rule)
        key = (tuple(out), tuple(st.accept_counts))
        assert runs.setdefault(rule, key) == key
    assert len(set(runs.values())) > 1


def test_setting_carries_the_rule_and_refuses_it_for_trees():
    """Setting(verify_rule=...) is checked, labelled and serialised; a tree refuses it (trees
    verify their top-k drafts with their own rule); generate() refuses an unknown rule."""
    s = Setting(temperature=0.7, verify_rule="strict")
    assert s.label == "healthy, verify strict" and s.as_dict()["verify_rule"] == "strict"
    assert Setting().verify_rule is None and Setting().label == "healthy"
    with pytest.raises(ValueError, match="unknown verify rule"):
        Setting(verify_rule="greedy")
    with pytest.raises(ValueError, match="applies to chains"):
        Setting(topk=2, depth=3, verify_rule="argmax")
    target, drafter = build("random", PROMPTS[0])
    with pytest.raises(ValueError, match="unknown verify rule"):
        generate(target, drafter, ids_of(PROMPTS[0]), layer_ids=LAYER_IDS, verify_rule="exact")
