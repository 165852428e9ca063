"""The tau-versus-context curve's cost (issue 30's goal: 128 to 4,096 prompt tokens in at most
2 minutes on 2 cores on the real pair), per length, in wall-clock and CPU seconds (CPU time is the
steadier figure on a shared machine).

    python benchmarks/context_curve.py [--threads 2] [--pair code|real] [--drafter DIR]
                                       [--lengths 128,256,...] [--n-docs 1]

`--pair code` (default): the code pair (its target's context is 1,024 tokens: longer lengths are
clipped and replaced by the longest prompt that fits). `--pair real`: SmolLM2-135M-Instruct with
`--drafter DIR`, or, when no trained drafter is given, a stand-in drafter shaped by the real pair's
recipe (train/drafter_chat.py) with untrained layers: its tau means nothing, its cost is the
real drafter's. One `context_curve` call: prompt cutting, then per length a target and a drafter pass.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from eagle_nb.conditions.context_curve import DEFAULT_LENGTHS, context_curve
from eagle_nb.experiment.pair import Pair
from eagle_nb.io.paths import CODE_DRAFTER, CODE_DRAFTER_SPECULATORS, CODE_TARGET, REAL_TARGET


def stand_in_drafter(out: Path) -> Path:
    """An untrained drafter shaped as the real pair's recipe (embedding, head rows, norm copied)."""
    from eagle_nb.checkpoints.save import save_drafter
    from eagle_nb.model.targets import load_target
    from eagle_nb.train.drafter_chat import ChatDrafterConfig, new_drafter
    target, _ = load_target(REAL_TARGET, device="cpu")
    c = ChatDrafterConfig()
    V, Vd = target.config.vocab_size, c.draft_vocab_size
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[:Vd] = True
    save_drafter(new_drafter(target, torch.zeros(Vd, dtype=torch.long), t2d, c), out, "eagle")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pair", choices=("code", "real"), default="code")
    ap.add_argument("--drafter", default=None, help="the real pair's trained drafter directory")
    ap.add_argument("--lengths", default=",".join(map(str, DEFAULT_LENGTHS)))
    ap.add_argument("--n-docs", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    lengths = [int(x) for x in a.lengths.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        w0, c0 = time.perf_counter(), time.process_time()
        if a.pair == "code":
            pair = Pair(CODE_TARGET, CODE_DRAFTER, speculators_path=str(CODE_DRAFTER_SPECULATORS), device="cpu")
            what = "code pair"
        else:
            drafter = a.drafter or stand_in_drafter(Path(tmp) / "drafter")
            pair = Pair(REAL_TARGET, drafter, device="cpu")
            what = "real target + " + (f"drafter {a.drafter}" if a.drafter else
                                       "stand-in untrained drafter (tau meaningless; cost only)")
        print(f"{what}, {a.threads} thread(s), {a.n_docs} prompt(s) per length; load "
              f"{time.perf_counter() - w0:.1f}s wall {time.process_time() - c0:.1f}s cpu")
        w, c = time.perf_counter(), time.process_time()
        curve = context_curve(pair, lengths=lengths, n_docs=a.n_docs)
        w, c = time.perf_counter() - w, time.process_time() - c
        print("| length | fed ids | tau | wall s (target + drafter pass) |\n|---|---|---|---|")
        for p in curve.points:
            print(f"| {p.length} | {p.prompt_tokens} | {p.tau:.3f} | {p.seconds:.1f} |")
        if curve.clipped:
            print(f"clipped (past the target's context {curve.target_context}): {curve.clipped}")
        print(f"\ncurve total (prompts cut + every point): {w:.1f}s wall, {c:.1f}s cpu "
              f"(goal on the real pair: <= 120 s on 2 cores)\n{curve.source}")

if __name__ == "__main__":
    main()
