"""The T > 0 one pass (loop/onepass_sampled.py) is the live loop's mean: its dynamic program over
step starts equals the greedy walk on 0/1 acceptances and a direct simulation of the step process
on fractional ones, and its expected tau and per-position acceptance, pooled over sampled
trajectories, equal the live loop's pooled over seeds under each verify rule (the code pair at
T = 1: the three rules' values lie far apart, so a wrong closed form cannot pass)."""
from __future__ import annotations

import random

import pytest
import torch

from eagle_nb.loop import onepass as OP
from eagle_nb.loop import onepass_sampled as OS
from eagle_nb.loop import target_states as TS
from eagle_nb.loop import verify_rules as VR
from eagle_nb.loop.chain import generate
from eagle_nb.loop.metrics import acceptance_metrics, from_histogram
from eagle_nb.model.layers import eagle3_layers
from helpers import code_pair, code_prompts


def _seq(n: int, eos_at: int | None, T0: int = 3) -> list[int]:
    s = [7] * T0 + [5 + (i % 3) for i in range(n)]
    if eos_at is not None:
        s[T0 + eos_at] = 2
    return s


@pytest.mark.parametrize("eos_at", [None, 9, 0])
def test_the_program_on_certain_acceptances_is_the_greedy_walk(eos_at):
    """With acceptance probabilities 0 or 1 the expected histogram is the histogram of the walk
    the greedy one pass takes on the same hits (budget and EOS stops included)."""
    rng = random.Random(eos_at or 1)
    T0, N, k = 3, 20, 4
    hits = torch.tensor([[rng.random() < 0.6 for _ in range(k)] for _ in range(N - 1)])
    seq = _seq(N + k, eos_at, T0)
    m = hits.long().cumprod(-1).sum(-1)
    for depth in range(1, k + 1):
        w = OP.walk(m, seq, T0, depth, N, eos_token_id=2)
        want = [w.accept_counts.count(i) for i in range(depth + 1)]
        assert OS.expected_histogram(hits.double(), seq, T0, depth, N, eos_token_id=2) == want


def test_the_program_on_fractional_acceptances_is_the_simulated_step_process():
    """Random acceptance probabilities: the expected histogram equals the mean of 5,000 simulated
    runs of the step process (each draft accepted with its probability), within 4 standard errors,
    bin by bin."""
    gen = torch.Generator().manual_seed(0)
    T0, N, k = 2, 16, 3
    a = torch.rand(N - 1, k, generator=gen, dtype=torch.float64)
    seq = _seq(N + k, 11, T0)
    want = OS.expected_histogram(a, seq, T0, k, N, eos_token_id=2)
    rng, runs = random.Random(0), 5000
    counts = torch.zeros(runs, k + 1)
    for i in range(runs):
        p = T0
        while p - T0 + 1 < N and seq[p] != 2:
            m = 0
            while m < k and rng.random() < a[p - T0, m]:
                m += 1
            counts[i, m] += 1
            if 2 in seq[p + 1:p + m + 1]:
                break
            p += m + 1
    mean, se = counts.mean(0), counts.std(0) / runs ** 0.5
    assert (mean - torch.tensor(want, dtype=mean.dtype)).abs().le(4 * se + 1e-9).all(), (mean, want)


def test_closed_forms_and_bad_input():
    """q(x) gathers the mass of every draft id mapped to x (none: 0); T = 0 and `sampled` without
    the target's probabilities are refused."""
    logp = torch.log(torch.tensor([[[0.5, 0.3, 0.2]]], dtype=torch.float64))
    tok = torch.tensor([[4]])
    assert OS._emitted_q(logp, tok, torch.tensor([4, 6, 8])).item() == pytest.approx(0.5)
    assert OS._emitted_q(logp, tok, torch.tensor([4, 4, 8])).item() == pytest.approx(0.8)
    assert OS._emitted_q(logp, torch.tensor([[5]]), torch.tensor([4, 6, 8])).item() == 0.0
    with pytest.raises(ValueError, match="T = 0"):
        OS.accept_probabilities(None, [], [], [], 4, 2, 0.0, VR.SAMPLED, None)
    with pytest.raises(ValueError, match="needs the target's probability"):
        OS.accept_probabilities(None, [], [], [], 4, 2, 1.0, VR.SAMPLED, None)


# -- against the live loop ------------------------------------------------------------------------
N_TOKENS, DEPTH, TEMP = 24, 3, 1.0


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def _live(pair, ids, rule, seeds):
    target, tok, drafter = pair.target, pair.tokenizer, pair.drafter
    layers = list(eagle3_layers(target.config.num_hidden_layers))
    counts = []
    for seed in seeds:
        for x in ids:
            _, st = generate(target, drafter, x, depth=DEPTH, max_new_tokens=N_TOKENS, temperature=TEMP,
                             seed=seed, layer_ids=layers, verify_rule=rule, eos_token_id=tok.eos_token_id)
            counts.append(st.accept_counts)
    return counts


def _expected(pair, ids, rules, seeds):
    target, tok, drafter = pair.target, pair.tokenizer, pair.drafter
    layers = list(eagle3_layers(target.config.num_hidden_layers))
    hists = {r: [] for r in rules}
    for seed in seeds:
        st = TS.from_target(target, ids, N_TOKENS + DEPTH, temperature=TEMP, seed=seed)
        feats = st.features("aux", layers)
        pe = [OS.target_probs(target.get_output_embeddings(), f, s, T0, TEMP)
              for f, s, T0 in zip(st.states[TS.FINAL], st.ids, st.prompt_lens)]
        for r in rules:
            a = OS.accept_probabilities(drafter, st.ids, feats, st.prompt_lens, N_TOKENS, DEPTH, TEMP, r, pe)
            hists[r] += OS.sampled_chain_run(a, st.ids, st.prompt_lens, DEPTH, N_TOKENS,
                                             tok.eos_token_id).hists
    return hists


def _tau_se(counts, n_boot=400):
    """Pooled tau and its bootstrap standard error over runs."""
    rng = random.Random(0)
    taus = []
    for _ in range(n_boot):
        pick = [counts[rng.randrange(len(counts))] for _ in counts]
        flat = [a for c in pick for a in c]
        taus.append(1 + sum(flat) / len(flat))
    flat = [a for c in counts for a in c]
    return 1 + sum(flat) / len(flat), float(torch.tensor(taus).std())


def _compare(pair, rules, live_seeds, pass_seeds):
    ids = [pair.tokenizer(p, return_tensors="pt")["input_ids"] for p in code_prompts(2)]
    expected = _expected(pair, ids, rules, pass_seeds)
    out = {}
    for r in rules:
        tau, se = _tau_se(_live(pair, ids, r, live_seeds))
        h = [sum(x[m] for x in expected[r]) for m in range(DEPTH + 1)]
        one = from_histogram(h, DEPTH).accept_length
        print(f"{r}: live tau {tau:.3f} +- {se:.3f} over {len(live_seeds)} seeds, one pass {one:.3f}")
        out[r] = (tau, se, one)
    return out


@pytest.mark.slow
def test_expected_tau_is_the_live_loops_mean_for_the_sampled_rule(pair):
    """`sampled` (rejection sampling) on the code pair at T = 1, 2 prompts x 24 tokens: the one
    pass over 12 trajectories per prompt and the live loop over 12 seeds agree within 4 bootstrap
    standard errors (plus the one pass's own spread), while `strict`'s closed form, q(x), would be
    far off (power)."""
    res = _compare(pair, [VR.SAMPLED, VR.STRICT], range(12), range(100, 112))
    tau, se, one = res[VR.SAMPLED]
    assert abs(tau - one) < 4 * se * 1.5, res
    assert abs(tau - res[VR.STRICT][2]) > 8 * se, res


@pytest.mark.slow
def test_expected_tau_is_the_live_loops_mean_under_every_rule(pair):
    """Every rule, 60 live seeds and 60 trajectories per prompt: within 4 bootstrap standard errors,
    and the three rules' one-pass values pairwise further apart than that."""
    res = _compare(pair, list(VR.VERIFY_RULES), range(60), range(100, 160))
    for r, (tau, se, one) in res.items():
        assert abs(tau - one) < 4 * se * 1.5, (r, res)
    ones = sorted(v[2] for v in res.values())
    assert min(b - a for a, b in zip(ones, ones[1:])) > 4 * max(v[1] for v in res.values()), res


def test_pair_runs_a_sampled_chain_in_expectation_by_default(pair):
    """`Pair.sampled_one_pass` (on by default): a T > 0 chain comes from the one pass (labelled, the
    trajectory as output, metrics equal to calling the module directly); off, the live loop runs it."""
    from eagle_nb.experiment.setting import Setting
    prompts = code_prompts(2)
    s = Setting(depth=DEPTH, temperature=TEMP, max_new_tokens=N_TOKENS, seed=5, verify_rule=VR.SAMPLED)
    res = pair.run(prompts, s)                   # the default
    pair.sampled_one_pass = False
    try:
        assert pair.run(prompts, s).computed_by == "live loop"
    finally:
        pair.sampled_one_pass = True
    assert res.computed_by == OS.COMPUTED_BY and any("in expectation" in n for n in res.notes)
    ids = [pair.tokenizer(p, return_tensors="pt")["input_ids"] for p in prompts]
    want = _expected(pair, ids, [VR.SAMPLED], [5])[VR.SAMPLED]
    h = [sum(x[m] for x in want) for m in range(DEPTH + 1)]
    assert res.metrics.accept_length == pytest.approx(from_histogram(h, DEPTH).accept_length, rel=1e-9)
    assert all(0 < len(st.tokens) <= N_TOKENS for st in res.stats)
