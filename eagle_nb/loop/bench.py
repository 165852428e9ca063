"""Timing helpers for benchmarks/: step costs of the target and drafter, and side-by-side decode
runs. Every comparison is measured in one process with interleaved repetitions (noisy machines),
and reported as medians and ratios. Knows nothing about printing.
"""
from __future__ import annotations

import statistics
import time

import torch

from eagle_nb.loop.chain import FEATURES_NONE, TargetRunner, generate, greedy_reference
from eagle_nb.loop.tree import generate_tree
from eagle_nb.loop.tree_shape import DraftTree, resolve_num_draft_tokens, tree_mask_4d


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def step_costs(pair, prompt_ids: torch.Tensor, ks, reps: int = 20, trees=()) -> dict:
    """Median seconds of: a plain cached target forward over 1 token (t1, as in target-only
    decoding: no hooks), the forward over k+1 tokens with the aux capture the loop uses
    (t_verify[k]), and one cached drafter step (t_draft). For each tree setting (steps, topk, N):
    the target forward over N nodes with a 4D tree mask and position ids (t_verify_tree_N) and a
    drafter step over topk frontier nodes with a tree mask (t_draft_w{topk})."""
    target, drafter, dev = pair.target, pair.drafter, pair.device
    widths = sorted({resolve_num_draft_tokens(*t) for t in trees})
    topks = sorted({t[1] for t in trees})
    out = {"t1": [], "t_draft": [], **{f"t_verify_{k}": [] for k in ks},
           **{f"t_verify_tree_{w}": [] for w in widths}, **{f"t_draft_w{k}": [] for k in topks}}
    with TargetRunner(target, None, feature_mode=FEATURES_NONE) as plain:
        plain.forward(prompt_ids, keep=1)
        n0 = plain.length
        for _ in range(reps):
            _sync(dev)
            t0 = time.perf_counter()
            plain.forward(prompt_ids[:, -1:])
            _sync(dev)
            out["t1"].append(time.perf_counter() - t0)
            plain.rollback(n0)
    with TargetRunner(target, pair.layer_ids) as runner:
        runner.forward(prompt_ids, keep=1)
        n = runner.length
        cache = drafter.new_cache(1, prompt_ids.shape[1] + 64)
        feats = torch.zeros(1, prompt_ids.shape[1], drafter.config.fc_in_features, device=dev,
                            dtype=drafter.fc.weight.dtype)
        drafter.step(prompt_ids, drafter.fuse(feats), cache, 0)
        cache.advance(prompt_ids.shape[1])
        h = torch.zeros(1, 1, drafter.config.hidden_size, device=dev, dtype=drafter.fc.weight.dtype)
        tok = prompt_ids[:, -1:]
        for _ in range(reps):
            for name, T in [(f"t_verify_{k}", k + 1) for k in ks]:
                ids = tok.repeat(1, T)
                _sync(dev)
                t0 = time.perf_counter()
                runner.forward(ids)
                _sync(dev)
                out[name].append(time.perf_counter() - t0)
                runner.rollback(n)
            for w in widths:                     # a star tree: the cost does not depend on shape
                t = DraftTree([0] * w, [-1] + [0] * (w - 1), [0] + [1] * (w - 1), [0.0] * w)
                _sync(dev)
                t0 = time.perf_counter()
                runner.forward(tok.repeat(1, w), position_ids=torch.tensor([t.depths], device=dev) + n,
                               attention_mask=tree_mask_4d(t, n, next(target.parameters()).dtype, dev))
                _sync(dev)
                out[f"t_verify_tree_{w}"].append(time.perf_counter() - t0)
                runner.rollback(n)
            pos = cache.pos
            for k in topks:
                mask = torch.ones(k, pos + k, dtype=torch.bool, device=dev)
                _sync(dev)
                t0 = time.perf_counter()
                drafter.step(tok.repeat(1, k), h.expand(1, k, -1), cache, pos,
                             positions=torch.full((k,), pos, device=dev), mask=mask)
                _sync(dev)
                out[f"t_draft_w{k}"].append(time.perf_counter() - t0)
                cache.rollback(pos)
            _sync(dev)
            t0 = time.perf_counter()
            drafter.step(tok, h, cache, pos)
            _sync(dev)
            out["t_draft"].append(time.perf_counter() - t0)
            cache.rollback(pos)
    return {k: statistics.median(v) for k, v in out.items()}


@torch.no_grad()
def hf_generate(target, ids, max_new_tokens: int, eos_token_id):
    t0 = time.perf_counter()
    out = target.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, top_p=None, top_k=None,
                          temperature=None, eos_token_id=eos_token_id, pad_token_id=eos_token_id)
    _sync(ids.device)
    return out[0, ids.shape[1]:].tolist(), time.perf_counter() - t0


def tree_name(steps: int, topk: int, n: int | None) -> str:
    return f"tree_{steps}_{topk}_{resolve_num_draft_tokens(steps, topk, n)}"


def decode_comparison(pair, prompts, ks, max_new_tokens: int, reps: int = 3, trees=()) -> dict:
    """Interleaved runs over all prompts: HF generate, our target-only loop, speculative at each k
    (chain) and at each tree setting (steps, topk, num_draft_tokens), named by `tree_name`.
    Returns {name: {"tokens": int, "seconds": median total, "outputs": [...], "tau": ...}}."""
    eos = pair.tokenizer.eos_token_id
    encoded = [pair.encode(p) for p in prompts]
    names = ["hf_generate", "target_loop", *[f"spec_k{k}" for k in ks], *[tree_name(*t) for t in trees]]
    tree_of = {tree_name(*t): t for t in trees}
    times = {n: [] for n in names}
    outputs, taus = {}, {}
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)]   # rotate the order
        for name in order:
            total, outs, counts = 0.0, [], []
            for ids in encoded:
                if name == "hf_generate":
                    toks, t = hf_generate(pair.target, ids, max_new_tokens, eos)
                elif name == "target_loop":
                    toks, t = greedy_reference(pair.target, ids, max_new_tokens, eos_token_id=eos)
                elif name in tree_of:
                    toks, st = generate_tree(pair.target, pair.drafter, ids, *tree_of[name],
                                             max_new_tokens=max_new_tokens, layer_ids=pair.layer_ids,
                                             eos_token_id=eos)
                    t = st.total_s
                    counts.extend(st.accept_counts)
                else:
                    k = int(name[len("spec_k"):])
                    toks, st = generate(pair.target, pair.drafter, ids, depth=k,
                                        max_new_tokens=max_new_tokens, layer_ids=pair.layer_ids,
                                        eos_token_id=eos)
                    t = st.total_s
                    counts.extend(st.accept_counts)
                total += t
                outs.append(toks)
            times[name].append(total)
            outputs[name] = outs
            if counts:
                taus[name] = 1 + sum(counts) / len(counts)
    return {n: {"seconds": statistics.median(times[n]), "outputs": outputs[n],
                "tokens": sum(len(o) for o in outputs[n]), "tau": taus.get(n)} for n in names}
