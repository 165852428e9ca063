"""Tests for eagle_nb.loop.tree: tree speculation is lossless, equals the chain loop at topk = 1, keeps
exactly the committed path in both caches, selects the tree SGLang/EAGLE would, and its sampling
rule preserves the target distribution.

Models are the loop's tiny seeded pair of tests/helpers.py (8-layer Llama, hidden 32, vocab 64,
drafter on layers 2, 4, 5) plus `TreeOracle`, a drafter that knows the target's greedy continuation
and ranks it first or, on a fixed pseudo-random set of positions, second: chains then miss tokens a
topk >= 2 tree recovers, so tree tau > chain tau is a checked property, not a hope.
"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from scipy import stats as sps
from torch import nn

from eagle_nb.loop import tree as tr
from eagle_nb.loop import tree_accept, tree_shape
from eagle_nb.model.kv_cache import KVCache, hf_cache_keep
from eagle_nb.loop.metrics import acceptance_metrics, from_stats
from eagle_nb.loop.chain import FEATURES_FINAL, FEATURES_NONE, TargetRunner, generate, greedy_reference
from eagle_nb.model.drafter import FC_ENGINE_WIDTH_CHECK, Eagle3Drafter
from eagle_nb.loop.tree import check_tree_target, draft_tree, generate_tree
from eagle_nb.loop.tree_accept import accept_tree_greedy, accept_tree_sample
from eagle_nb.loop.tree_shape import DraftTree, TreeUnsupported
from helpers import (H, LAYER_IDS, LOOP_V, PROMPTS, build, build_arch, chisq_p, ids_of,
                     make_drafter, make_target, text_config, text_ids)

V = LOOP_V                       # the loop pair's target vocab

GRID = [(1, 2, None), (2, 2, 4), (3, 3, 6), (4, 2, 8), (3, 4, 10)]   # (num_steps, topk, N)
SLOW_GRID = [(s, k, n) for s in (1, 2, 4, 6) for k in (2, 3, 5) for n in (3, 6, 12, 24)
             if n <= 1 + tree_shape.candidate_count(s, k)]


class TreeOracle(nn.Module):
    """Duck-typed drafter: at RoPE position p it ranks the target's greedy token full[p+2] first,
    or second behind (full[p+2] + 1) % V at positions in `second`. Extends are checked for the
    docs/drafter.md pairing. Positions come from `positions` (tree steps) or the slot (extend, chain steps)."""

    def __init__(self, full: list[int], second_rate: float = 0.35, seed: int = 0):
        super().__init__()
        self.fc = nn.Linear(1, 1, bias=False)
        self.full = full
        rng = random.Random(seed)
        self.second = {p for p in range(len(full)) if rng.random() < second_rate}
        self._extend = False
        self.pairing_errors = []

    def new_cache(self, batch_size, max_len):
        return KVCache(1, batch_size, max_len, 1, 1)

    def fuse(self, feats, fc_policy="strict"):
        self._extend = True
        return feats[..., :H]

    def step(self, input_ids, g, cache, start, positions=None, mask=None):
        T = input_ids.shape[1]
        cache.update(0, start, torch.zeros(1, 1, T, 1), torch.zeros(1, 1, T, 1))
        ids = input_ids[0].tolist()
        if self._extend and ids != self.full[start + 1:start + 1 + T]:
            self.pairing_errors.append((start, ids))
        self._extend = False
        pos = list(range(start, start + T)) if positions is None else positions.tolist()
        logits = torch.zeros(1, T, V)
        for j, p in enumerate(pos):
            tok = self.full[p + 2] if p + 2 < len(self.full) else 0
            logits[0, j, tok] = 8.0 if p not in self.second else 7.0
            if p in self.second:
                logits[0, j, (tok + 1) % V] = 8.0
        return logits, torch.zeros(1, T, H)

    def draft_to_target(self, draft_ids, d2t=None):
        return draft_ids


def build_tree_kind(kind: str, prompt: list[int], horizon: int = 64):
    if kind == "tree-oracle":
        target = make_target()
        ref, _ = greedy_reference(target, ids_of(prompt), horizon)
        return target, TreeOracle(prompt + ref, seed=len(prompt))
    return build(kind, prompt, horizon)


def committed(stats) -> list[int]:
    out = stats.tokens[:1]
    for s in stats.steps:
        bonus = s.target_tokens[s.path[-1] if s.path else 0]
        out = out + s.accepted_tokens + [bonus]
    return out


# -- losslessness ------------------------------------------------------------------------------------
def _lossless(kinds, grid, max_new=30):
    taus = {}
    for kind in kinds:
        for prompt in PROMPTS:
            target, drafter = build_tree_kind(kind, prompt)
            ref, _ = greedy_reference(target, ids_of(prompt), max_new)
            for steps, topk, n in grid:
                out, st = generate_tree(target, drafter, ids_of(prompt), steps, topk, n,
                                        max_new_tokens=max_new, layer_ids=LAYER_IDS)
                assert out == ref, (kind, prompt, steps, topk, n, st.accept_counts)
                assert committed(st)[:max_new] == out
                N = st.num_draft_tokens
                assert all(len(s.draft_tokens) == N - 1 for s in st.steps)
                assert all(0 <= a <= steps for a in st.accept_counts)
                taus.setdefault((kind, steps, topk, N), []).extend(st.accept_counts)
            if kind == "tree-oracle":
                assert drafter.pairing_errors == []
    return taus


@pytest.mark.parametrize("kind", ["random", "zero-one", "tree-oracle"])
def test_greedy_tree_speculation_is_lossless(kind):
    """Temperature 0: generate_tree emits exactly greedy_reference's tokens on every prompt for a
    grid of (num_steps, topk, num_draft_tokens); its trace replays to the same tokens; every verify
    step verifies num_draft_tokens - 1 drafts. With the tree oracle, some accepted path leaves the
    first-child chain (the case only a tree can accept)."""
    taus = _lossless([kind], GRID)
    if kind == "tree-oracle":
        assert any(a > 0 for counts in taus.values() for a in counts)


def _shipped_lossless(grid, max_new, every: int = 1):
    from helpers import code_pair, code_prompts
    pair = code_pair()
    eos = pair.tokenizer.eos_token_id
    counts = {}
    for p in code_prompts()[::every]:
        ids = pair.encode(p)
        ref, _ = greedy_reference(pair.target, ids, max_new, eos_token_id=eos)
        for steps, topk, n in grid:
            out, st = generate_tree(pair.target, pair.drafter, ids, steps, topk, n,
                                    max_new_tokens=max_new, layer_ids=pair.layer_ids, eos_token_id=eos)
            assert out == ref, (p[:40], steps, topk, n)
            counts.setdefault((steps, topk, n), []).extend(st.accept_counts)
    return {k: 1 + np.mean(v) for k, v in counts.items()}


SHIPPED_GRID = [(3, 1, None), (3, 4, 8), (2, 2, 3)]


def test_shipped_prompts_lossless_on_the_shipped_pair():
    """The shipped target and drafter: tree speculation equals target-only greedy on every other
    shipped evaluation prompt (8 of 16; all of them: the slow test below) at three SGLang
    settings, and the 3/4/8 tree accepts more than the chain of the same depth."""
    tau = _shipped_lossless(SHIPPED_GRID, 24, every=2)
    assert tau[(3, 4, 8)] > tau[(3, 1, None)]


@pytest.mark.slow
def test_shipped_prompts_lossless_every_prompt():
    """As above, on all 16 shipped evaluation prompts."""
    tau = _shipped_lossless(SHIPPED_GRID, 24)
    assert tau[(3, 4, 8)] > tau[(3, 1, None)]


@pytest.mark.slow
def test_shipped_prompts_lossless_big_grid():
    _shipped_lossless([(2, 2, 4), (4, 4, 16), (5, 4, 8), (6, 4, 16), (8, 4, 24), (5, 8, 32)], 64)


@pytest.mark.slow
def test_greedy_tree_speculation_is_lossless_big_grid():
    _lossless(["random", "zero-one", "tree-oracle"], SLOW_GRID, max_new=40)


@pytest.mark.parametrize("kind", ["random", "zero-one", "oracle", "agree-all", "agree-none"])
def test_topk1_is_the_chain_loop(kind):
    """topk = 1 (num_draft_tokens forced to steps + 1, as SGLang does) gives the chain loop's
    tokens, accept counts and per-step drafts exactly, at depths 1, 2, 4 and 7."""
    for prompt in PROMPTS:
        target, drafter = build(kind, prompt)
        for depth in (1, 2, 4, 7):
            out_c, st_c = generate(target, drafter, ids_of(prompt), depth=depth, max_new_tokens=25,
                                   layer_ids=LAYER_IDS)
            out_t, st_t = generate_tree(target, drafter, ids_of(prompt), depth, 1, 99,
                                        max_new_tokens=25, layer_ids=LAYER_IDS)
            assert out_t == out_c and st_t.accept_counts == st_c.accept_counts, (depth, prompt)
            assert [s.draft_tokens for s in st_t.steps] == [s.draft_tokens for s in st_c.steps]
            assert st_t.num_draft_tokens == depth + 1


def test_tree_beats_chain_at_the_same_depth():
    """The tree oracle misses its first choice on ~35% of positions: at depth 4 a topk-2 tree with 8
    nodes accepts strictly more per verify than the chain (and both stay lossless)."""
    taus = _lossless(["tree-oracle"], [(4, 1, None), (4, 2, 8)], max_new=40)
    chain = np.mean(taus[("tree-oracle", 4, 1, 5)])
    wide = np.mean(taus[("tree-oracle", 4, 2, 8)])
    assert wide > chain + 0.3, (chain, wide)


# -- the tree SGLang/EAGLE would build, node by node -------------------------------------------------
# A Markov drafter over 6 tokens: the next-token distribution depends on the input token only.
P = {0: [.02, .5, .3, .1, .05, .03], 1: [.01, .02, .04, .58, .3, .05],
     2: [.02, .05, .01, .01, .01, .9], 3: [.55, .01, .4, .01, .02, .01],
     5: [.05, .04, .01, .1, .8, 0.0]}


class MarkovDrafter(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(1, 1, bias=False)
        self.calls = []

    def step(self, input_ids, g, cache, start, positions=None, mask=None):
        T = input_ids.shape[1]
        cache.update(0, start, torch.zeros(1, 1, T, 1), torch.zeros(1, 1, T, 1))
        self.calls.append(dict(ids=input_ids[0].tolist(), start=start, positions=positions, mask=mask))
        rows = [torch.tensor(P.get(t, [1 / 6] * 6)).clamp_min(1e-9).log() for t in input_ids[0].tolist()]
        return torch.stack(rows)[None], torch.zeros(1, T, 1)

    def draft_to_target(self, d, d2t=None):
        return d


def test_hand_built_tree_is_selected_and_masked_as_sglang_does():
    """num_steps 3, topk 2, num_draft_tokens 6 from root 0. Candidates (cumulative probs):
    step 0: 1 (.5), 2 (.3); step 1 expands 1 -> 3 (.29), 4 (.15) and 2 -> 5 (.27), 1 (.015), keeps
    3 and 5; step 2 expands 3 -> 0 (.1595), 2 (.116) and 5 -> 4 (.216), 3 (.027). The 5 best: 1, 2, 3,
    5, then 4 under 5. Drafter calls: frontier [1, 2] at RoPE n, slots n, n+1; frontier [3, 5] at
    RoPE n+1, slots n+2, n+3, each seeing the prefix, its ancestor slot and itself."""
    d, n = MarkovDrafter(), 4
    cache = KVCache(1, 1, 32, 1, 1)
    cache.advance(n)
    t = draft_tree(d, torch.tensor(P[0]).log(), torch.zeros(1), cache, n, 0, 3, 2, 6)
    assert t.tokens == [0, 1, 2, 3, 5, 4]
    assert t.parents == [-1, 0, 0, 1, 2, 4]
    assert t.depths == [0, 1, 1, 2, 2, 3]
    expect = [1, .5, .3, .5 * .58, .3 * .9, .3 * .9 * .8]
    assert all(math.isclose(math.exp(s), e, rel_tol=1e-5) for s, e in zip(t.scores, expect))
    c1, c2 = d.calls
    assert c1["ids"] == [1, 2] and c1["start"] == n and c1["positions"].tolist() == [n, n]
    assert c2["ids"] == [3, 5] and c2["start"] == n + 2 and c2["positions"].tolist() == [n + 1] * 2
    pre = [True] * n
    assert c1["mask"].tolist() == [pre + [True, False], pre + [False, True]]
    assert c2["mask"].tolist() == [pre + [True, False, True, False], pre + [False, True, False, True]]
    m = t.ancestor_mask().int().tolist()
    assert m[5] == [1, 0, 1, 0, 1, 1] and m[3] == [1, 1, 0, 1, 0, 0]
    # fewer nodes keep the best prefix of the ranking; parents always precede children
    t4 = draft_tree(MarkovDrafter(), torch.tensor(P[0]).log(), torch.zeros(1), cache, n, 0, 3, 2, 4)
    assert t4.tokens == [0, 1, 2, 3] and t4.parents == [-1, 0, 0, 1]


HAND = DraftTree([0, 1, 2, 3, 5, 4], [-1, 0, 0, 1, 2, 4], [0, 1, 1, 2, 2, 3], [0.0] * 6)


@pytest.mark.parametrize("target_tokens, path", [
    ([2, 9, 5, 9, 4, 0], [2, 4, 5]),    # second child, then down to the deepest leaf; bonus 0
    ([1, 3, 9, 0, 9, 9], [1, 3]),       # first child, its child, then a leaf
    ([1, 4, 9, 9, 9, 9], [1]),          # node 1 has child 3 only: 4 is rejected
    ([5, 9, 9, 9, 9, 9], []),           # no child of the root carries 5
    ([2, 9, 3, 9, 9, 9], [2]),          # node 2's child is 5, not 3 (3 lives under node 1)
])
def test_accept_tree_greedy_walks_the_hand_built_tree(target_tokens, path):
    """Node by node: each step follows the child whose token is the target's argmax at the current
    node; the bonus is the target's token at the last accepted node."""
    got = accept_tree_greedy(HAND.tokens, HAND.parents, torch.tensor(target_tokens))
    assert got == path
    chain_like = accept_tree_greedy([7, 3, 5, 7], [-1, 0, 1, 2], [3, 5, 8, 1])
    assert chain_like == [1, 2]


def test_real_drafter_tree_steps_equal_chains_along_each_path(monkeypatch):
    """Tree attention inside the drafter: every frontier row of every tree step (logits and state)
    equals a plain chain pass (slot == position, causal) over the prefix plus that node's ancestor
    path, recomputed from the recorded inputs."""
    target = make_target()
    drafter = make_drafter(target)
    calls, real = [], drafter.step

    def spy(ids, g, cache, start, positions=None, mask=None):
        snap = (cache.k[..., :start, :].clone(), cache.v[..., :start, :].clone())
        lg, h = real(ids, g, cache, start, positions=positions, mask=mask)
        calls.append(dict(ids=ids[0].tolist(), g=g[0].clone(), start=start, positions=positions,
                          mask=mask, lg=lg[0].clone(), h=h[0].clone(), snap=snap))
        return lg, h

    monkeypatch.setattr(drafter, "step", spy)
    generate_tree(target, drafter, ids_of(PROMPTS[2]), 4, 3, 12, max_new_tokens=12,
                  layer_ids=LAYER_IDS)
    checked = 0
    for ci, c in enumerate(calls):
        if c["mask"] is None:
            continue
        # the cycle's extend wrote prefix slots 0..n-1; tree slots start at n
        n = next(e["start"] + len(e["ids"]) for e in reversed(calls[:ci]) if e["mask"] is None)
        slot_of = {}
        for e in calls[:ci + 1]:
            if e["mask"] is not None and e["start"] >= n:
                for r in range(len(e["ids"])):
                    slot_of[e["start"] + r] = (e, r)
        for r in range(len(c["ids"])):
            anc = [s for s in range(n, c["start"] + len(c["ids"])) if c["mask"][r, s]]
            ref = KVCache(1, 1, 128, drafter.config.num_key_value_heads, drafter.config.head_dim)
            ref.k[..., :n, :], ref.v[..., :n, :] = c["snap"][0][..., :n, :], c["snap"][1][..., :n, :]
            ref.advance(n)
            for depth_i, s in enumerate(anc):
                e, row = slot_of[s]
                lg, h = Eagle3Drafter.step(drafter, torch.tensor([[e["ids"][row]]]),
                                           e["g"][row][None, None], ref, n + depth_i)
                ref.advance(n + depth_i + 1)
            torch.testing.assert_close(lg[0, -1], c["lg"][r], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(h[0, -1], c["h"][r], atol=1e-4, rtol=1e-4)
            assert int(c["positions"][r]) == n + depth_i
            checked += 1
    assert checked >= 3 * 3 * 2


# -- caches hold exactly the committed path -------------------------------------------------------------
@pytest.mark.parametrize("kind, steps, topk, n", [("random", 3, 3, 8), ("zero-one", 4, 2, 7),
                                                   ("tree-oracle", 4, 2, 8), ("tree-oracle", 3, 1, None)])
def test_caches_hold_exactly_the_committed_path(kind, steps, topk, n, monkeypatch):
    """After every verify step the target cache equals (keys and values, every layer) a fresh cache
    built by one uncached forward over prompt + committed tokens (bonus excluded), so compaction
    kept exactly the accepted nodes; before every tree draft the drafter cache holds exactly the
    committed prefix, equal to an uncached drafter pass over it with the target's features."""
    prompt = PROMPTS[2]
    target, drafter = build_tree_kind(kind, prompt)
    ref, _ = greedy_reference(target, ids_of(prompt), 30)
    kept, drafts = [], []                  # snapshots, checked against the final commit below
    real_keep, real_draft = tr.hf_cache_keep, tr.draft_tree

    def keep_spy(cache, start, keep):
        real_keep(cache, start, keep)
        kept.append((cache.get_seq_length(), keep != list(range(len(keep))),
                     [(la.keys.clone(), la.values.clone()) for la in cache.layers]))

    def draft_spy(drafter_, logits0, h0, cache, n_, root, *a):
        assert cache.pos == n_
        drafts.append((n_, cache.k[..., :n_, :].clone(), cache.v[..., :n_, :].clone()))
        return real_draft(drafter_, logits0, h0, cache, n_, root, *a)

    monkeypatch.setattr(tr, "hf_cache_keep", keep_spy)
    monkeypatch.setattr(tr, "draft_tree", draft_spy)
    out, st = generate_tree(target, drafter, ids_of(prompt), steps, topk, n, max_new_tokens=30,
                            layer_ids=LAYER_IDS)
    assert out == ref
    full = prompt + committed(st)
    assert len(kept) == len(drafts) == len(st.steps) > 0
    done = 1
    for j, (length, _, layers) in enumerate(kept):
        done += st.steps[j].accepted + 1
        assert length == len(prompt) + done - 1            # prefix + committed, bonus not yet in
        with TargetRunner(target, None, feature_mode=FEATURES_NONE) as fresh:
            fresh.forward(ids_of(full[:length]))
        for (k, v), lay in zip(layers, fresh.cache.layers):
            torch.testing.assert_close(k, lay.keys, atol=1e-5, rtol=1e-4)
            torch.testing.assert_close(v, lay.values, atol=1e-5, rtol=1e-4)
    if isinstance(drafter, Eagle3Drafter):
        from eagle_nb.model.capture import capture
        for n_, k, v in drafts:
            with capture(target, LAYER_IDS) as cap, torch.no_grad():
                target(input_ids=ids_of(full[:n_]))
                c = drafter.new_cache(1, 128)
                drafter.step(ids_of(full[1:n_ + 1]), drafter.fuse(cap.fused()), c, 0)
            torch.testing.assert_close(k, c.k[..., :n_, :], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(v, c.v[..., :n_, :], atol=1e-4, rtol=1e-4)
    if kind == "tree-oracle" and topk > 1:
        assert any(off for _, off, _ in kept)    # a non-contiguous path was compacted and checked


def test_hf_cache_keep_refuses_what_it_cannot_compact():
    """Bad offsets name the offsets and the cache length; a sliding-window layer is refused by its
    class name before anything is changed."""
    from transformers import DynamicCache
    target = make_target()
    with TargetRunner(target, None, feature_mode=FEATURES_NONE) as r:
        r.forward(ids_of(PROMPTS[2]))
        for bad in ([1, 2], [0, 2, 2], [0, 11]):
            with pytest.raises(ValueError, match=r"cannot keep offsets .* cache holds 11"):
                hf_cache_keep(r.cache, 5, bad)
    m = build_arch("mistral")
    with TargetRunner(m, None, feature_mode=FEATURES_NONE) as r:
        r.forward(text_ids(m, 1, 6))
        before = r.cache.get_seq_length()
        with pytest.raises(TypeError, match="DynamicSlidingWindowLayer"):
            hf_cache_keep(r.cache, 2, [0, 2])
        assert r.cache.get_seq_length() == before and isinstance(r.cache, DynamicCache)


# -- which targets can verify a tree ----------------------------------------------------------------------
TREE_ARCHS = ["llama", "qwen2", "qwen3", "qwen3_moe", "mixtral", "phi3", "gpt2", "deepseek_v3",
              "llava", "qwen2_5_vl"]
NO_TREE_ARCHS = ["mistral", "gemma2", "gemma3_text", "gemma3_multimodal", "mistral3"]


def _path_to(t: DraftTree, j: int) -> list[int]:
    out = []
    while j >= 0:
        out.append(t.tokens[j])
        j = t.parents[j]
    return out[::-1]


@pytest.mark.parametrize("name", TREE_ARCHS + ["llama-eager", "mistral-no-window"])
def test_tree_verify_equals_path_forwards_on_supported_targets(name):
    """Through TargetRunner: one cached forward over a 6-node tree with the 4D mask and position
    ids gives, at every node, the logits of an uncached forward over prefix + that node's path;
    after compacting to a non-contiguous path, the next cached forward equals an uncached one."""
    import transformers as tf
    if name == "llama-eager":
        torch.manual_seed(0)
        m = tf.LlamaForCausalLM(tf.LlamaConfig(**text_config(), attn_implementation="eager")).eval()
        assert m.config._attn_implementation == "eager"
    elif name == "mistral-no-window":
        torch.manual_seed(0)
        m = tf.MistralForCausalLM(tf.MistralConfig(**text_config(sliding_window=None))).eval()
    else:
        m = build_arch(name)
    check_tree_target(m)
    ids = text_ids(m, 1, 13)[0].tolist()
    prefix, t = ids[:6], DraftTree(ids[6:12], [-1, 0, 0, 1, 2, 3], [0, 1, 1, 2, 2, 3], [0.0] * 6)
    with TargetRunner(m, None, feature_mode=FEATURES_NONE) as r, torch.no_grad():
        r.forward(ids_of(prefix))
        n = len(prefix)
        mask = tr.tree_mask_4d(t, n, next(m.parameters()).dtype, "cpu")
        lg, _ = r.forward(ids_of(t.tokens), attention_mask=mask,
                          position_ids=torch.tensor([t.depths]) + n)
        for j in range(6):
            want = m(input_ids=ids_of(prefix + _path_to(t, j))).logits[0, -1]
            torch.testing.assert_close(lg[0, j], want, atol=1e-4, rtol=1e-4)
        hf_cache_keep(r.cache, n, [0, 2, 4])
        lg2, _ = r.forward(ids_of([ids[12]]))
        want = m(input_ids=ids_of(prefix + _path_to(t, 4) + [ids[12]])).logits[0, -1]
        torch.testing.assert_close(lg2[0, -1], want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", NO_TREE_ARCHS)
def test_sliding_window_targets_are_refused_by_name(name):
    m = build_arch(name)
    with pytest.raises(TreeUnsupported, match=rf"{type(m).__name__}: sliding-window"):
        check_tree_target(m)
    drafter = make_drafter(make_target())
    with pytest.raises(TreeUnsupported):
        generate_tree(m, drafter, text_ids(m, 1, 4), 2, 2, 4, max_new_tokens=4, layer_ids=[1, 2, 3])


def test_attention_without_custom_masks_is_refused():
    m = make_target()
    m.config._attn_implementation = "flash_attention_2"
    with pytest.raises(TreeUnsupported, match=r"LlamaForCausalLM: attention implementation "
                                              r"'flash_attention_2'.*sdpa"):
        check_tree_target(m)


def test_num_draft_tokens_rules():
    assert tr.resolve_num_draft_tokens(3, 1, 8) == 4          # SGLang forces steps + 1 at topk 1
    assert tr.resolve_num_draft_tokens(3, 4, None) == 1 + 4 + 2 * 16
    assert tr.resolve_num_draft_tokens(5, 4, 8) == 8
    for bad in (1, 1 + 4 + 2 * 16 + 1):
        with pytest.raises(ValueError, match="num_draft_tokens"):
            tr.resolve_num_draft_tokens(3, 4, bad)


# -- named faults run unchanged ---------------------------------------------------------------------------
def test_fc_bypass_fault_runs_through_trees():
    """The fc-bypass fault (final hidden state + engine width check) passes through generate_tree's
    feature arguments: strict drafters refuse it by width, the ablated one runs and stays lossless."""
    target = make_target()
    drafter = make_drafter(target)
    prompt = ids_of(PROMPTS[1])
    with pytest.raises(ValueError, match=r"32 wide .* fc expects 96"):
        generate_tree(target, drafter, prompt, 3, 2, 5, max_new_tokens=8, feature_mode=FEATURES_FINAL)
    ref, _ = greedy_reference(target, prompt, 16)
    out, _ = generate_tree(target, drafter, prompt, 3, 2, 5, max_new_tokens=16,
                           feature_mode=FEATURES_FINAL, fc_policy=FC_ENGINE_WIDTH_CHECK)
    assert out == ref


# -- sampling ----------------------------------------------------------------------------------------
# Context-free toy: the target's next-token distribution depends on the last token only (Markov
# matrix M over V = 5); the tree's nodes carry their token, so p[node] = M[token(node)].
M = torch.tensor([[.45, .25, .15, .1, .05], [.1, .5, .2, .1, .1], [.3, .1, .1, .4, .1],
                  [.05, .05, .2, .3, .4], [.2, .2, .2, .2, .2]], dtype=torch.float64)
TOY = DraftTree([0, 0, 1, 3, 0, 1, 4], [-1, 0, 0, 0, 1, 1, 3], [0, 1, 1, 1, 2, 2, 2], [0.0] * 7)


def _wrong_no_residual(tokens, parents, p, generator):
    """A plausible wrong rule: each child tested against the unmodified p, bonus from p."""
    kids = tree_accept.children_of(parents)
    node, path = 0, []
    while True:
        for c in kids.get(node, ()):
            if torch.rand((), generator=generator, dtype=p.dtype) < p[node][tokens[c]]:
                path.append(c)
                node = c
                break
        else:
            return path, int(torch.multinomial(p[node], 1, generator=generator))


def _two_token_pvalues(rule, n: int = 20000, seed: int = 0):
    """Run one tree cycle n times; chi-square of the first emitted token against M[root] and of
    (first, second) pairs, where a second token was emitted, against M[first]."""
    p = M[TOY.tokens]
    gen = torch.Generator().manual_seed(seed)
    first, pairs = np.zeros(5), np.zeros((5, 5))
    for _ in range(n):
        path, tok = rule(TOY.tokens, TOY.parents, p, gen)
        emitted = [TOY.tokens[j] for j in path] + [tok]
        first[emitted[0]] += 1
        if len(emitted) > 1:
            pairs[emitted[0], emitted[1]] += 1
    p1 = chisq_p(first, M[0].numpy())
    obs, exp = pairs.flatten(), (pairs.sum(1, keepdims=True) * M.numpy()).flatten()
    keep = exp > 0
    p2 = sps.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue
    return p1, p2


def test_tree_sampling_preserves_the_target_distribution():
    """Recursive rejection over a 3-way root with grandchildren: over 20k seeded cycles the first
    emitted token follows M[root] and the second follows M[first] (chi-square)."""
    p1, p2 = _two_token_pvalues(accept_tree_sample)
    assert p1 > 1e-3 and p2 > 1e-3, (p1, p2)


def test_tree_distribution_check_has_power_against_a_wrong_rule():
    assert _two_token_pvalues(_wrong_no_residual)[0] < 1e-6


def test_tree_sampling_end_to_end_is_uniform_and_seeded():
    """Uniform target and drafter (both lm_heads zero), topk 2: emitted tokens are uniform over all
    64 ids; the same seed reproduces tokens and trace, another seed differs."""
    target, drafter = build("agree-all", PROMPTS[0])
    counts, runs = np.zeros(V), {}
    for seed in range(3):
        out, st = generate_tree(target, drafter, ids_of(PROMPTS[0]), 2, 2, 4, max_new_tokens=200,
                                temperature=1.0, seed=seed, layer_ids=LAYER_IDS)
        np.add.at(counts, out, 1)
        runs[seed] = out
    assert chisq_p(counts, np.full(V, 1 / V)) > 1e-3
    again, _ = generate_tree(target, drafter, ids_of(PROMPTS[0]), 2, 2, 4, max_new_tokens=40,
                             temperature=1.0, seed=1, layer_ids=LAYER_IDS)
    assert again == runs[1][:40] and runs[0] != runs[1]


# -- metrics in the engines' tree definitions -----------------------------------------------------------
def test_tree_metrics_use_num_draft_tokens():
    """SGLang accept length = 1 + mean accepted; accept rate = accept_len / num_draft_tokens (old)
    and accepted / (num_draft_tokens - 1) per verify (new); vLLM per-position rates by depth."""
    m = acceptance_metrics([0, 2, 3, 1], depth=3, num_draft_tokens=8)
    assert m.accept_length == 2.5                              # SGLang accept len is tau
    assert m.sglang_accept_rate_by_draft_tokens == 2.5 / 8
    assert m.draft_acceptance_rate == 6 / (4 * 7)
    assert m.drafted == 4 * 7 and m.num_draft_tokens == 8
    assert m.per_position_acceptance == [3 / 4, 2 / 4, 1 / 4]
    chain = acceptance_metrics([0, 2, 3, 1], depth=3)
    assert chain.num_draft_tokens == 4 and chain.sglang_accept_rate_by_draft_tokens == 2.5 / 4
    target, drafter = build("zero-one", PROMPTS[1])
    runs = [generate_tree(target, drafter, ids_of(PROMPTS[1]), 3, 2, 6, max_new_tokens=12,
                          layer_ids=LAYER_IDS)[1] for _ in range(2)]
    pooled = from_stats(runs)
    assert pooled.num_draft_tokens == 6 and pooled.verify_steps == sum(len(s.steps) for s in runs)
    with pytest.raises(ValueError, match="num_draft_tokens"):
        from_stats([runs[0], generate(target, drafter, ids_of(PROMPTS[1]), depth=3,
                                      max_new_tokens=8, layer_ids=LAYER_IDS)[1]])


# -- CLI: SGLang flags in, SGLang's numbers out ----------------------------------------------------------
def _cli_json(capsys, *args):
    import json

    from eagle_nb.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(["speculate", *args, "--json"])
    out = capsys.readouterr().out
    assert e.value.code == 0, out
    return json.loads(out)


def test_cli_tree_flags_and_named_fault(capsys, tmp_path):
    """`speculate --depth 3 --topk 4 --num-draft-tokens 8` on the code pair (the flags, not the
    pair, are under test; the real pair's CLI run is tests/cli/test_cli.py's): lossless, the
    setting echoes SGLang's flags, the SGLang rate uses num_draft_tokens, and the fc-bypass fault
    collapses acceptance through trees as through chains."""
    import json

    from eagle_nb.io.paths import CODE
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(line + "\n" for line in CODE.prompts.read_text().splitlines()[:3]))
    flags = ["--target", str(CODE.target), "--drafter", str(CODE.drafter), "--prompts", str(prompts),
             "--depth", "3", "--topk", "4", "--num-draft-tokens", "8", "--max-new-tokens", "32"]
    healthy = _cli_json(capsys, *flags)
    bypass = _cli_json(capsys, *flags, "--ablate", "fc-bypass")
    for r in (healthy, bypass):
        assert r["matches_target_greedy"] is True
        assert r["setting"]["topk"] == 4 and r["setting"]["num_draft_tokens"] == 8
        assert r["sglang_accept_rate_by_draft_tokens"] == pytest.approx(r["accept_length"] / 8)
        assert r["draft_acceptance_rate"] == pytest.approx((r["accept_length"] - 1) / 7)
    assert healthy["accept_length"] > bypass["accept_length"] + 0.5
    assert json.dumps(healthy["setting"])
