"""Timing helpers for benchmarks/: step costs of the target and drafter, and side-by-side decode
runs. Every comparison is measured in one process with interleaved repetitions (noisy machines),
and reported as medians and ratios. Knows nothing about printing.
"""
from __future__ import annotations

import statistics
import time

import torch

from .speculate import FEATURES_NONE, TargetRunner, generate, greedy_reference


def _sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def step_costs(pair, prompt_ids: torch.Tensor, ks, reps: int = 20) -> dict:
    """Median seconds of: a plain cached target forward over 1 token (t1, as in target-only
    decoding: no hooks), the forward over k+1 tokens with the aux capture the loop uses
    (t_verify[k]), and one cached drafter step (t_draft)."""
    target, drafter, dev = pair.target, pair.drafter, pair.device
    out = {"t1": [], "t_draft": [], **{f"t_verify_{k}": [] for k in ks}}
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
            pos = cache.pos
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


def decode_comparison(pair, prompts, ks, max_new_tokens: int, reps: int = 3) -> dict:
    """Interleaved runs over all prompts: HF generate, our target-only loop, speculative at each k.
    Returns {name: {"tokens": int, "seconds": median total, "outputs": [...]}, "tau_k": ...}."""
    eos = pair.tokenizer.eos_token_id
    encoded = [pair.encode(p) for p in prompts]
    names = ["hf_generate", "target_loop", *[f"spec_k{k}" for k in ks]]
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
