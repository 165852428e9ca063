"""Tests for eagle_nb.loop.chain: the loop is lossless, its caches hold exactly what was committed,
and its acceptance rule preserves the target distribution.

Every model is a tiny random one built in tests/helpers.py, seeded, CPU only: an 8-layer Llama
target (hidden 32, vocab 64) and an EAGLE-3 drafter reading target layers (2, 4, 5). Weights are
drawn with std 0.2 so the random target's greedy continuation varies instead of repeating one token.

Mocks pin the acceptance count where random weights cannot:
- `constant target`: lm_head = 0, so all logits tie and the greedy token is 0 everywhere;
- `constant drafter`: lm_head = 0, so it always drafts draft id 0 (mapped to target id 0 or 1);
- `zero-one target`: lm_head rows 1.. = u, row 0 = v, so the target answers 0 or 1 depending on
  its real hidden state; against the constant drafter every accept count 0..k shows up;
- `OracleDrafter`: a duck-typed drafter that knows the target's greedy continuation and drafts it,
  wrong on a fixed pseudo-random set of positions; it checks the token pairing of every extend.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats as sps

from eagle_nb.loop import chain as speculate
from eagle_nb.model.capture import capture
from eagle_nb.model.decoder import find_decoder_layers
from eagle_nb.model.drafter import FC_ENGINE_WIDTH_CHECK, Eagle3Drafter
from eagle_nb.loop.metrics import acceptance_metrics
from eagle_nb.loop.chain import FEATURES_FINAL, generate, greedy_reference
from eagle_nb.loop.verify_rules import accept_greedy, accept_sample
from eagle_nb.model.targets import make_wrapper
from helpers import (LAYER_IDS, LOOP_V, LOOP_VD, PROMPTS, build, chisq_p, ids_of, make_drafter,
                     make_target)

V, VD = LOOP_V, LOOP_VD          # the loop pair's target vocab and reduced draft vocab
KINDS = ("random", "zero-one", "oracle")


def committed_tokens(stats) -> list[int]:
    """Every token the loop committed, before truncation: first token, then per verify step the
    accepted drafts plus the target's token after them (greedy)."""
    out = stats.tokens[:1]
    for s in stats.steps:
        out = out + s.draft_tokens[:s.accepted] + [s.target_tokens[s.accepted]]
    return out


# -- losslessness --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_greedy_speculation_is_lossless_at_every_depth(kind):
    """Temperature 0: generate() emits exactly greedy_reference's tokens, for depths 1..8 and
    prompts of length 1, 5 and 11, whatever the drafter proposes; the SpecStats trace replays to
    the same tokens. The random drafter is almost always rejected, the zero-one target and the
    oracle produce every accept count 0..k (asserted, so the coverage cannot silently vanish)."""
    seen = {}
    for prompt in PROMPTS:
        target, drafter = build(kind, prompt)
        ref, _ = greedy_reference(target, ids_of(prompt), 30)
        for depth in range(1, 9):
            out, stats = generate(target, drafter, ids_of(prompt), depth=depth, max_new_tokens=30,
                                  layer_ids=LAYER_IDS)
            assert out == ref, (kind, prompt, depth, stats.accept_counts)
            assert committed_tokens(stats)[:30] == out
            assert all(0 <= a <= depth for a in stats.accept_counts)
            seen.setdefault(depth, set()).update(stats.accept_counts)
        if kind == "oracle":
            assert drafter.pairing_errors == []
    assert all(0 in s for s in seen.values())
    if kind != "random":
        for depth, s in seen.items():
            assert depth in s, (depth, s)                       # full acceptance happens
            if depth > 1:
                assert s & set(range(1, depth)), (depth, s)     # and partial acceptance


@pytest.mark.parametrize("kind", ["random", "oracle", "agree-all"])
def test_max_new_tokens_truncates_like_the_reference(kind):
    """A budget that ends mid-cycle (the last verify step commits more than is left) gives exactly
    the first max_new_tokens reference tokens, never more."""
    prompt = PROMPTS[1]
    target, drafter = build(kind, prompt)
    for max_new in (1, 2, 3, 4, 5, 6, 7, 9, 13):
        ref, _ = greedy_reference(target, ids_of(prompt), max_new)
        for depth in (1, 4):
            out, stats = generate(target, drafter, ids_of(prompt), depth=depth,
                                  max_new_tokens=max_new, layer_ids=LAYER_IDS)
            assert out == ref and len(out) == max_new, (max_new, depth)
            assert stats.tokens == out


@pytest.mark.parametrize("kind", ["random", "oracle"])
def test_eos_stops_both_paths_at_the_same_token(kind):
    """With eos = the token at each first occurrence in the reference continuation (the prefill
    token, a bonus token, or an accepted draft), speculation stops exactly where the reference
    does, eos included; an eos that never occurs changes nothing."""
    prompt = PROMPTS[2]
    target, drafter = build(kind, prompt)
    long_ref, _ = greedy_reference(target, ids_of(prompt), 24)
    firsts = {}
    for i, tok in enumerate(long_ref):
        firsts.setdefault(tok, i)
    absent = next(t for t in range(V) if t not in firsts)
    eos_as_draft = 0
    for eos, i in [*firsts.items(), (absent, None)]:
        ref, _ = greedy_reference(target, ids_of(prompt), 24, eos_token_id=eos)
        assert ref == (long_ref if i is None else long_ref[:i + 1])
        for depth in (1, 4):
            out, stats = generate(target, drafter, ids_of(prompt), depth=depth, max_new_tokens=24,
                                  layer_ids=LAYER_IDS, eos_token_id=eos)
            assert out == ref, (eos, depth)
            eos_as_draft += any(eos in s.draft_tokens[:s.accepted] for s in stats.steps)
    if kind == "oracle":
        assert eos_as_draft > 0     # the "eos among accepted drafts" exit was exercised


# -- mocks pin tau exactly -----------------------------------------------------------------------
@pytest.mark.parametrize("depth", range(1, 9))
def test_always_agreeing_mock_pins_tau_to_k_plus_1(depth):
    """Constant target (always 0) and a drafter that always drafts target id 0: every verify step
    accepts all k drafts, so tau = k + 1 exactly; the output is still the reference (all zeros)."""
    target, drafter = build("agree-all", PROMPTS[1])
    out, stats = generate(target, drafter, ids_of(PROMPTS[1]), depth=depth, max_new_tokens=40,
                          layer_ids=LAYER_IDS)
    assert out == [0] * 40 == greedy_reference(target, ids_of(PROMPTS[1]), 40)[0]
    assert stats.accept_counts and all(a == depth for a in stats.accept_counts)
    m = acceptance_metrics(stats.accept_counts, depth)
    assert m.accept_length == depth + 1
    assert m.per_position_acceptance == [1.0] * depth and m.draft_acceptance_rate == 1.0


@pytest.mark.parametrize("depth", range(1, 9))
def test_never_agreeing_mock_pins_tau_to_1(depth):
    """Constant target (always 0) and a drafter whose draft id 0 maps to target id 1 (d2t[0] = 1,
    t2d consistent): nothing is ever accepted, tau = 1 exactly, one verify step per new token."""
    target, drafter = build("agree-none", PROMPTS[1])
    assert not bool(drafter.t2d[0]) and bool(drafter.t2d[1])
    out, stats = generate(target, drafter, ids_of(PROMPTS[1]), depth=depth, max_new_tokens=12,
                          layer_ids=LAYER_IDS)
    assert out == [0] * 12
    assert stats.accept_counts == [0] * 11
    assert all(s.draft_tokens == [1] * depth for s in stats.steps)
    assert acceptance_metrics(stats.accept_counts, depth).accept_length == 1.0


# -- cache rollback --------------------------------------------------------------------------------
class Trace:
    def __init__(self):
        self.target: list[dict] = []
        self.drafter: list[dict] = []
        self.runner = None


def spy_on(monkeypatch, drafter) -> Trace:
    """Record every target forward/rollback (with a shadow list of the ids the target cache holds)
    and every drafter step (with the cache position and the target cache length at that time)."""
    trace = Trace()

    class SpyRunner(speculate.TargetRunner):
        def __enter__(self):
            trace.runner, self.shadow = self, []
            return super().__enter__()

        def forward(self, ids, keep=None):
            assert self.length == len(self.shadow)
            context = list(self.shadow)
            logits, feats = super().forward(ids, keep)
            self.shadow += ids[0].tolist()
            trace.target.append(dict(kind="forward", context=context, ids=ids[0].tolist(),
                                     logits=logits[0].clone(), feats=feats[0].clone()))
            return logits, feats

        def rollback(self, to_len):
            super().rollback(to_len)
            del self.shadow[to_len:]
            trace.target.append(dict(kind="rollback", to=to_len, length=self.length))

    monkeypatch.setattr(speculate, "TargetRunner", SpyRunner)
    real_step = drafter.step

    def step(input_ids, g, cache, start):
        pos, target_len = cache.pos, trace.runner.length
        logits, h = real_step(input_ids, g, cache, start)
        trace.drafter.append(dict(ids=input_ids[0].tolist(), start=start, pos=pos,
                                  target_len=target_len, logits=logits[0].clone(), h=h[0].clone()))
        return logits, h

    monkeypatch.setattr(drafter, "step", step)
    return trace


def _close(a, b):
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


ROLLBACK_KINDS = ("random", "zero-one", "agree-all", "agree-none")


@pytest.mark.parametrize("depth", [1, 3, 8])
@pytest.mark.parametrize("kind", ROLLBACK_KINDS)
def test_caches_hold_exactly_the_committed_positions(kind, depth, monkeypatch):
    """After every verify step the target cache holds prompt_len + committed - 1 positions (the
    bonus token is not in it yet) and exactly those ids; every cached target forward equals an
    uncached forward over the same ids (logits and captured features); every drafter extend starts
    where the previous commit ended and covers the target's committed positions with the docs/drafter.md
    pairing; every drafter output (logits and state) equals an uncached drafter pass over the
    committed sequence plus the drafts. Accept counts 0, partial and k are all visited across kinds."""
    prompt, max_new = PROMPTS[2], 40
    T0 = len(prompt)
    target, drafter = build(kind, prompt)
    ref, _ = greedy_reference(target, ids_of(prompt), max_new)
    trace = spy_on(monkeypatch, drafter)
    out, stats = generate(target, drafter, ids_of(prompt), depth=depth, max_new_tokens=max_new,
                          layer_ids=LAYER_IDS)
    assert out == ref
    counts = stats.accept_counts
    expect = {"agree-all": lambda: set(counts) == {depth},
              "agree-none": lambda: set(counts) == {0},
              "random": lambda: 0 in counts,
              "zero-one": lambda: {0, depth} <= set(counts) and (depth == 1 or set(counts) - {0, depth})}
    assert expect[kind](), counts

    committed = committed_tokens(stats)
    full = prompt + committed
    fwd = [e for e in trace.target if e["kind"] == "forward"]
    rb = [e for e in trace.target if e["kind"] == "rollback"]
    assert len(fwd) == len(stats.steps) + 1 and len(rb) == len(stats.steps)

    # target: positions and ids
    assert fwd[0]["context"] == [] and fwd[0]["ids"] == prompt
    done = 1                                                   # committed tokens so far
    for j, s in enumerate(stats.steps):
        n = T0 + done - 1
        assert fwd[j + 1]["context"] == full[:n]
        assert fwd[j + 1]["ids"] == [full[n]] + s.draft_tokens
        done += s.accepted + 1
        assert rb[j]["to"] == rb[j]["length"] == T0 + done - 1
    assert trace.runner.shadow == full[:T0 + done - 1]

    # target: cached forwards equal uncached ones
    for e in fwd:
        seq = e["context"] + e["ids"]
        with capture(target, LAYER_IDS) as st, torch.no_grad():
            logits = target(input_ids=ids_of(seq)).logits[0]
        _close(e["logits"], logits[-e["logits"].shape[0]:])
        _close(e["feats"], st.fused()[0, -len(e["ids"]):])

    # drafter: positions, pairing and content against an uncached recomputation
    with capture(target, LAYER_IDS) as st, torch.no_grad():
        target(input_ids=ids_of(full))
        fused_all = drafter.fuse(st.fused())                   # (1, len(full), H)
    calls = trace.drafter
    assert len(calls) == depth * len(stats.steps)
    done, prev_n = 1, 0
    for j, s in enumerate(stats.steps):
        n = T0 + done - 1
        cycle = calls[j * depth:(j + 1) * depth]
        ext = cycle[0]
        assert ext["start"] == ext["pos"] == prev_n            # drafts of the last cycle forgotten
        assert ext["start"] + len(ext["ids"]) == ext["target_len"] == n
        assert ext["ids"] == full[ext["start"] + 1:n + 1]      # embedding of t+1 with state of t
        for i, c in enumerate(cycle[1:], 1):
            assert c["start"] == c["pos"] == n + i - 1 and c["ids"] == [s.draft_tokens[i - 1]]
        ids, g = full[1:n + 1], fused_all[:, :n]
        with torch.no_grad():
            for i, c in enumerate(cycle):
                if i:
                    ids, g = ids + [s.draft_tokens[i - 1]], torch.cat([g, h[:, -1:]], 1)
                lg, h = Eagle3Drafter.step(drafter, ids_of(ids), g, None, 0)
                T = len(c["ids"])
                _close(c["logits"], lg[0, -T:])
                _close(c["h"], h[0, -T:])
        prev_n, done = n, done + s.accepted + 1


# -- other targets and feature modes ----------------------------------------------------------------
def test_wrapper_target_gives_identical_speculation():
    """The same weights inside a Llava wrapper (decoder at model.language_model.layers) give the
    same greedy reference, the same speculative tokens and the same per-step drafts/accept counts."""
    target = make_target()
    drafter = make_drafter(target)
    wrapper = make_wrapper(target)
    assert find_decoder_layers(wrapper)[0] == "model.language_model.layers"
    for prompt in PROMPTS[1:]:
        ref, _ = greedy_reference(target, ids_of(prompt), 20)
        assert greedy_reference(wrapper, ids_of(prompt), 20)[0] == ref
        for depth in (1, 3):
            out_t, st_t = generate(target, drafter, ids_of(prompt), depth=depth, max_new_tokens=20,
                                   layer_ids=LAYER_IDS)
            out_w, st_w = generate(wrapper, drafter, ids_of(prompt), depth=depth,
                                   max_new_tokens=20, layer_ids=LAYER_IDS)
            assert out_w == out_t == ref
            assert [s.draft_tokens for s in st_w.steps] == [s.draft_tokens for s in st_t.steps]
            assert st_w.accept_counts == st_t.accept_counts


def test_final_hidden_features_fail_loudly_unless_width_check_fault():
    """feature_mode='final-hidden' hands over one H-wide state: the strict fc policy refuses it
    with a ValueError about widths; with the engines' width-check policy (passed explicitly) it
    runs (fc skipped) and is still lossless, because verification alone decides the output."""
    target = make_target()
    drafter = make_drafter(target)
    prompt = ids_of(PROMPTS[1])
    with pytest.raises(ValueError, match=r"32 wide .* fc expects 96"):
        generate(target, drafter, prompt, depth=3, max_new_tokens=8, feature_mode=FEATURES_FINAL)
    ref, _ = greedy_reference(target, prompt, 20)
    for depth in (1, 4):
        out, _ = generate(target, drafter, prompt, depth=depth, max_new_tokens=20,
                          feature_mode=FEATURES_FINAL, fc_policy=FC_ENGINE_WIDTH_CHECK)
        assert out == ref


# -- the acceptance rule as a pure function ---------------------------------------------------------
@pytest.mark.parametrize("draft, target, expected", [
    ([3, 5, 7], [3, 5, 7, 9], 3),     # all match
    ([4, 5, 7], [3, 5, 7, 9], 0),     # first mismatch (later matches do not count)
    ([3, 6, 7], [3, 5, 7, 9], 1),     # mid mismatch
    ([3, 5, 8], [3, 5, 7, 9], 2),     # last mismatch
    ([3], [3, 1], 1),
    ([2], [3, 1], 0),
])
def test_accept_greedy_counts_the_leading_matches(draft, target, expected):
    """accept_greedy = number of leading drafts equal to the target's tokens at the same positions."""
    assert accept_greedy(torch.tensor(draft), torch.tensor(target)) == expected


def _dist(*rows) -> torch.Tensor:
    t = torch.tensor(rows, dtype=torch.float64)
    return t / t.sum(-1, keepdim=True)


P3 = _dist([4, 3, 1, 1, .5, .5], [1, 1, 3, 3, 1, 1], [.5, 2, .5, 2, 3, 2])   # (k+1=3, V=6)


def test_accept_sample_accepts_everything_when_draft_equals_target():
    """q == p: min(1, p/q) = 1, so all k drafts are accepted for every seed, and the extra token is
    the bonus drawn from p[k] (chi-square against p[k])."""
    q = P3[:2]
    bonus = np.zeros(6)
    gen = torch.Generator().manual_seed(0)
    drafts = torch.stack([torch.multinomial(q[i], 3000, replacement=True, generator=gen)
                          for i in range(2)], 1)
    for x in drafts:
        a, tok = accept_sample(x, q, P3, gen)
        assert a == 2
        bonus[tok] += 1
    assert chisq_p(bonus, P3[2]) > 1e-3


def test_accept_sample_rejects_zero_mass_and_resamples_the_residual():
    """p puts zero mass on the draft token: rejected at position 0 every time, the replacement is
    never the draft token and follows normalise(max(p - q, 0)) (chi-square)."""
    q = _dist([5, 2, 1, 1, .5, .5], [1, 1, 1, 1, 1, 1])
    p = _dist([0, 1, 3, 2, 2, 2], [1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1])
    resid = (p[0] - q[0]).clamp(min=0)
    gen = torch.Generator().manual_seed(1)
    counts = np.zeros(6)
    for _ in range(4000):
        a, tok = accept_sample(torch.tensor([0, 3]), q, p, gen)
        assert a == 0 and tok != 0
        counts[tok] += 1
    assert counts[1] == 0                         # p[1] < q[1]: no residual mass there
    assert chisq_p(counts, resid / resid.sum()) > 1e-3


def test_accept_sample_accepts_with_probability_min_1_p_over_q():
    """A single draft with p(x) = 0.3, q(x) = 0.6 is accepted half the time (binomial test)."""
    q = torch.tensor([[0.6, 0.4]], dtype=torch.float64)
    p = torch.tensor([[0.3, 0.7], [0.5, 0.5]], dtype=torch.float64)
    gen = torch.Generator().manual_seed(2)
    n = 4000
    accepted = sum(accept_sample(torch.tensor([0]), q, p, gen)[0] for _ in range(n))
    assert sps.binomtest(accepted, n, 0.5).pvalue > 1e-3


def _always_accept(draft_tokens, q, p, generator):
    k = draft_tokens.numel()
    return k, int(torch.multinomial(p[k], 1, generator=generator))


def _resample_from_p(draft_tokens, q, p, generator):
    """A subtle wrong rule: the right acceptance test, but the replacement drawn from p."""
    for i in range(draft_tokens.numel()):
        x = int(draft_tokens[i])
        if torch.rand((), generator=generator, dtype=torch.float64) * q[i, x] > p[i, x]:
            return i, int(torch.multinomial(p[i], 1, generator=generator))
    k = draft_tokens.numel()
    return k, int(torch.multinomial(p[k], 1, generator=generator))


def _first_token_pvalue(rule, k: int, n: int = 20000, seed: int = 0) -> float:
    """One speculative cycle n times on a context-free toy (V = 6): drafts from q, the rule decides,
    the first emitted token is the first draft if accepted, else the replacement. Chi-square of
    that token against p[0]."""
    q = _dist([1, 1, 3, 3, 1, 1], [3, 1, 1, 1, 2, 2])[:k]
    p = P3[:k + 1]
    gen = torch.Generator().manual_seed(seed)
    drafts = torch.stack([torch.multinomial(q[i], n, replacement=True, generator=gen)
                          for i in range(k)], 1)
    counts = np.zeros(6)
    for x in drafts:
        a, tok = rule(x, q, p, gen)
        counts[int(x[0]) if a >= 1 else tok] += 1
    return chisq_p(counts, p[0])


@pytest.mark.parametrize("k", [1, 2])
def test_rejection_sampling_preserves_the_target_distribution(k):
    """Chi-square, as the EAGLE authors test it: the first token emitted by accept_sample over 20k
    seeded cycles is distributed as the target's p[0], although drafts come from a different q."""
    assert _first_token_pvalue(accept_sample, k) > 1e-3


@pytest.mark.parametrize("rule", [_always_accept, _resample_from_p])
def test_distribution_check_has_power_against_wrong_rules(rule):
    """The same chi-square check rejects an always-accept rule and a rule that resamples from p
    instead of the residual: the test above can fail."""
    assert _first_token_pvalue(rule, 1) < 1e-6


# -- sampling end to end -----------------------------------------------------------------------------
def test_sampling_is_reproducible_per_seed_and_differs_across_seeds():
    """generate(temperature=1.0): the same seed gives the same tokens and the same trace; a
    different seed gives different tokens (draft vocab 48 < 64 exercises the d2t scatter of q)."""
    target = make_target()
    drafter = make_drafter(target)
    prompt = ids_of(PROMPTS[1])
    runs = {}
    for seed in (0, 0, 1):
        out, st = generate(target, drafter, prompt, depth=3, max_new_tokens=16, temperature=1.0,
                           seed=seed, layer_ids=LAYER_IDS)
        assert len(out) == 16 and all(0 <= t < V for t in out)
        key = (tuple(out), tuple(st.accept_counts), tuple(tuple(s.draft_tokens) for s in st.steps))
        assert runs.setdefault(seed, key) == key
    assert runs[0][0] != runs[1][0]


def test_sampled_speculation_emits_the_target_distribution_end_to_end():
    """Uniform target (lm_head = 0) against a uniform drafter over target ids 0..47: correct
    speculative sampling emits i.i.d. uniform tokens over all 64 ids (ids 48..63 only via residual
    or bonus draws), and accepts each draft w.p. min(1, (1/64)/(1/48)) = 0.75."""
    target, drafter = build("agree-all", PROMPTS[0])      # both lm_heads zero: p, q uniform
    counts, accept = np.zeros(V), []
    for seed in range(4):
        out, st = generate(target, drafter, ids_of(PROMPTS[0]), depth=2, max_new_tokens=160,
                           temperature=1.0, seed=seed, layer_ids=LAYER_IDS)
        np.add.at(counts, out, 1)
        accept += st.accept_counts
    assert chisq_p(counts, np.full(V, 1 / V)) > 1e-3
    m = acceptance_metrics(accept, 2)
    n = len(accept)
    assert sps.binomtest(round(m.per_position_acceptance[0] * n), n, 0.75).pvalue > 1e-3
    assert abs(m.conditional_alpha[1] - 0.75) < 0.15
