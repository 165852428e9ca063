"""Computing from a recording (the one door, `RecordedPair`: one pass) vs the live loop on the
shipped pair: seconds per 1k generated tokens, side by side, and whether every accept count agrees.
Also the one-off cost of recording.

    python benchmarks/replay.py [--prompts 16] [--tokens 64] [--depths 1,4,8] [--threads 1]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

from eagle_nb.model.layers import eagle3_layers
from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.recordings.recording import record
from eagle_nb.experiment.recorded_pair import RecordedPair
from eagle_nb.experiment.setting import Setting
from eagle_nb.experiment.pair import shipped_prompts
from eagle_nb.loop.chain import generate
from eagle_nb.model.targets import load_target
from eagle_nb.io.paths import SHIPPED_DRAFTER


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--depths", default="1,4,8")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model, tok = load_target(device="cpu")
    drafter = load_drafter(SHIPPED_DRAFTER, model, dtype=torch.float32)   # the live loop's dtype on CPU
    layers = list(eagle3_layers(8))
    ids = [tok(p, return_tensors="pt")["input_ids"] for p in shipped_prompts(a.prompts)]
    depths = [int(d) for d in a.depths.split(",")]
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        path = record(model, ids, d, layers, max_new_tokens=a.tokens, lookahead=max(depths),
                      eos_token_id=tok.eos_token_id, progress=False)
        rec_s = time.perf_counter() - t0
        n_rec = a.prompts * (a.tokens + max(depths))
        print(f"record: {rec_s:.2f}s for {n_rec} tokens ({1000 * rec_s / n_rec:.2f}s per 1k)")
        print("| k | tau | live s/1k tok | replay s/1k tok | live/replay | accept counts equal |")
        print("|---|---|---|---|---|---|")
        for k in depths:
            t0 = time.perf_counter()
            live = [generate(model, drafter, x, depth=k, max_new_tokens=a.tokens, layer_ids=layers,
                             eos_token_id=tok.eos_token_id)[1] for x in ids]
            live_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            rp = RecordedPair(path, SHIPPED_DRAFTER, device="cpu")      # drafter in float32 on CPU
            res = rp.run(rp.prompts(), Setting(depth=k, max_new_tokens=a.tokens), progress=False)
            rep_s = time.perf_counter() - t0
            n = res.new_tokens
            same = all(s.accept_counts == t.accept_counts for s, t in zip(res.stats, live))
            print(f"| {k} | {res.metrics.accept_length:.2f} | {1000 * live_s / n:.2f} | "
                  f"{1000 * rep_s / n:.2f} | {live_s / rep_s:.2f}x | {same} |")


if __name__ == "__main__":
    main()
