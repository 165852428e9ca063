"""Speculative decoding speed on the shipped pair (or yours), measured side by side in one run.

Prints, per depth k: tau, speedup over our target-only loop, the cost-model prediction
tau*t1 / (t_verify + k*t_draft), their ratio (loop efficiency), and speedup over HF `generate`.
Then the same per tree setting steps/topk/N (SGLang's num_steps/eagle_topk/num_draft_tokens),
beside the chain of the same depth; its cost model uses the tree's verify width N:
tau*t1 / (t_verify_tree(N) + t_draft + (steps-1)*t_draft(topk wide)).

    python benchmarks/speculate.py [--target PATH] [--drafter PATH] [--prompts N] [--max-new-tokens N]
                                   [--ks 1,2,4] [--trees 4x4x16,5x4x8]
"""
from __future__ import annotations

import argparse
import platform

import torch

from eagle_nb.loop.bench import decode_comparison, step_costs, tree_name
from eagle_nb.experiment.pair import Pair, shipped_prompts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", default=None)
    ap.add_argument("--drafter", default=None)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--ks", default="1,2,3,4,5,6,7,8")
    ap.add_argument("--trees", default="3x4x8,4x4x16,5x4x8,5x4x16,6x4x16,8x4x24",
                    help="tree settings steps x topk x num_draft_tokens, comma-separated ('' = none)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    ks = [int(k) for k in a.ks.split(",")]
    trees = [tuple(int(x) for x in t.split("x")) for t in a.trees.split(",") if t]
    pair = Pair(a.target, a.drafter, device=a.device)
    prompts = shipped_prompts(a.prompts)
    print(f"machine: {platform.machine()} {platform.processor()}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}, device {pair.device}")
    print(f"target {pair.target_path or 'shipped'}, drafter {pair.drafter_path}; {len(prompts)} prompts "
          f"x {a.max_new_tokens} new tokens, greedy, median of {a.reps} interleaved reps")

    costs = step_costs(pair, pair.encode(prompts[0]), ks, trees=trees)
    res = decode_comparison(pair, prompts, ks, a.max_new_tokens, reps=a.reps, trees=trees)
    ref = res["target_loop"]
    hf = res["hf_generate"]
    same_hf = hf["outputs"] == ref["outputs"]
    print(f"t1 {costs['t1'] * 1e3:.2f} ms   t_draft {costs['t_draft'] * 1e3:.2f} ms   "
          + "   ".join(f"t_verify(k={k}) {costs[f't_verify_{k}'] * 1e3:.2f} ms" for k in ks))
    print(f"HF generate: {hf['tokens'] / hf['seconds']:.1f} tok/s   our target-only loop: "
          f"{ref['tokens'] / ref['seconds']:.1f} tok/s   (identical outputs: {same_hf})")
    print(f"{'k':>2} {'tau':>6} {'tok/s':>7} {'speedup':>8} {'predicted':>9} {'efficiency':>10} "
          f"{'vs HF gen':>9} {'lossless':>8}")
    for k in ks:
        r = res[f"spec_k{k}"]
        speed = (r["tokens"] / r["seconds"]) / (ref["tokens"] / ref["seconds"])
        predicted = r["tau"] * costs["t1"] / (costs[f"t_verify_{k}"] + k * costs["t_draft"])
        vs_hf = (r["tokens"] / r["seconds"]) / (hf["tokens"] / hf["seconds"])
        print(f"{k:>2} {r['tau']:>6.2f} {r['tokens'] / r['seconds']:>7.1f} {speed:>7.2f}x "
              f"{predicted:>8.2f}x {speed / predicted:>10.2f} {vs_hf:>8.2f}x "
              f"{str(r['outputs'] == ref['outputs']):>8}")
    if not trees:
        return
    print("tree costs: " + "   ".join(f"{k} {v * 1e3:.2f} ms" for k, v in costs.items()
                                      if k.startswith(("t_verify_tree", "t_draft_w"))))
    print(f"{'steps/topk/N':>12} {'tau':>6} {'chain tau':>9} {'tok/s':>7} {'speedup':>8} "
          f"{'predicted':>9} {'efficiency':>10} {'vs HF gen':>9} {'lossless':>8}")
    for steps, topk, n in trees:
        name = tree_name(steps, topk, n)
        N = int(name.rsplit("_", 1)[1])
        r = res[name]
        chain = res.get(f"spec_k{steps}", {}).get("tau")
        speed = (r["tokens"] / r["seconds"]) / (ref["tokens"] / ref["seconds"])
        predicted = r["tau"] * costs["t1"] / (costs[f"t_verify_tree_{N}"] + costs["t_draft"]
                                              + (steps - 1) * costs[f"t_draft_w{topk}"])
        vs_hf = (r["tokens"] / r["seconds"]) / (hf["tokens"] / hf["seconds"])
        print(f"{f'{steps}/{topk}/{N}':>12} {r['tau']:>6.2f} "
              f"{(f'{chain:.2f}' if chain else '-'):>9} {r['tokens'] / r['seconds']:>7.1f} "
              f"{speed:>7.2f}x {predicted:>8.2f}x {speed / predicted:>10.2f} {vs_hf:>8.2f}x "
              f"{str(r['outputs'] == ref['outputs']):>8}")


if __name__ == "__main__":
    main()
