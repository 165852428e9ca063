"""The drafter recipe's phases in float32 and bfloat16 side by side (issue 34): the target's states
(features, tokens/s), training-time test steps (steps/s and tokens/s) and, with the engine
environment, vLLM's answers (tokens/s), each phase's two precisions interleaved in one run on the
same committed requests; and how far bf16 moves the features' labels (argmax agreement).

    python benchmarks/recipe_precision.py [--sequences 64] [--steps 12] [--threads 2] [--answers 128]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.io.paths import REAL
from eagle_nb.model.layers import eagle3_layers
from eagle_nb.model.targets import load_target
from eagle_nb.train import chat_data, precision
from eagle_nb.train.drafter_chat import ChatDrafterConfig, fit
from eagle_nb.train.drafter_scale import read_committed

DTYPES = ("float32", "bfloat16")


def features(target, seqs, layers, dtype, work: Path) -> tuple[float, list[dict]]:
    t0 = time.perf_counter()
    with precision.autocast(dtype):
        shards = chat_data.features_phase(work, target, seqs, layers)
    return time.perf_counter() - t0, chat_data.load_shards(shards)


def train_steps(target, seqs, dtype, steps: int, work: Path) -> float:
    torch.manual_seed(0)
    drafter = load_drafter(REAL.drafter, target, dtype=torch.float32)
    head_w = target.lm_head.weight[drafter.t2d].detach().clone()
    c = ChatDrafterConfig(precision=dtype, checkpoint_every=10 ** 6, acc_every=4, epochs=1)
    t0 = time.perf_counter()
    fit(drafter, seqs, [], lambda f: f @ head_w.T, c, work, work / "log", stop_after=steps)
    return time.perf_counter() - t0


def answers(reqs, eos: int, dtype: str, n_tokens: int, work: Path) -> float | None:
    """vLLM's generation throughput in `dtype` (tokens/s as engines/vllm_batch.py reports it for its
    chunk, engine start-up excluded); None without the engine environment."""
    from eagle_nb.engines.server import EngineError, engine_python
    try:
        py = engine_python()
    except EngineError as e:
        print(f"answers: skipped ({e})")
        return None
    inp, out = work / f"in-{dtype}.jsonl", work / f"out-{dtype}.jsonl"
    inp.write_text("".join(json.dumps({"id": r["id"], "prompt_ids": r["prompt_ids"], "temperature": 0.0}) + "\n"
                           for r in reqs))
    script = Path(chat_data.__file__).resolve().parents[1] / "engines" / "vllm_batch.py"
    res = subprocess.run([str(py), str(script), "--model", str(REAL.target), "--requests", str(inp),
                          "--out", str(out), "--eos", str(eos), "--max-new-tokens", str(n_tokens),
                          "--dtype", dtype, "--chunk", str(len(reqs))], check=True, capture_output=True, text=True)
    rates = re.findall(r"answered, (\d+) tokens/s", res.stdout)
    if not rates:
        raise RuntimeError(f"vllm_batch printed no throughput line:\n{res.stdout[-2000:]}")
    return float(rates[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--answers", type=int, default=128, help="requests answered by vLLM per dtype (0: skip)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(precision.choose("auto")[1])
    target, tok = load_target(str(REAL.target), device="cpu", dtype=torch.float32)
    layers = list(eagle3_layers(target.config.num_hidden_layers))
    reqs, by_id = read_committed()
    reqs = [r for r in reqs if r["id"] in by_id][:max(a.sequences, a.answers)]
    for r in reqs:
        r["prompt_ids"] = chat_data.render(tok, r["messages"])
    seqs = chat_data.sequences(reqs[:a.sequences], [by_id[r["id"]] for r in reqs[:a.sequences]])
    n_tok = sum(len(q["ids"]) for q in seqs)
    rows, feats = {}, {}
    with tempfile.TemporaryDirectory() as d:
        for dtype in DTYPES + DTYPES:                      # interleaved: fp32, bf16, fp32, bf16
            work = Path(d) / f"f-{dtype}-{len(feats)}"
            work.mkdir()
            s, feats[dtype] = features(target, seqs, layers, dtype, work)
            rows.setdefault(("target states (features)", dtype), []).append(n_tok / s)
        agree = sum(int((x["argmax"] == y["argmax"]).sum()) for x, y in zip(feats["float32"], feats["bfloat16"]))
        print(f"labels: the bf16 target's argmax equals the fp32 one's at {agree / n_tok:.1%} of {n_tok:,} positions")
        train = feats["bfloat16"]
        step_tokens = ChatDrafterConfig().batch_tokens
        for dtype in DTYPES + DTYPES:
            work = Path(d) / f"t-{dtype}-{time.monotonic_ns()}"
            work.mkdir()
            s = train_steps(target, train, dtype, a.steps, work)
            rows.setdefault(("training-time test (steps of ~1,024 tokens)", dtype), []).append(a.steps / s)
        if a.answers:
            for dtype in DTYPES:
                work = Path(d) / f"a-{dtype}"
                work.mkdir()
                rate = answers(reqs[:a.answers], tok.eos_token_id, dtype, 128, work)
                if rate is not None:
                    rows[("answers, vLLM offline engine", dtype)] = [rate]
    print("| phase | float32 | bfloat16 | bf16 / fp32 | unit |")
    print("|---|---|---|---|---|")
    for phase in dict.fromkeys(p for p, _ in rows):
        f, b = (max(rows[(phase, dt)]) for dt in DTYPES)
        unit = "steps/s" if "training" in phase else "tokens/s"
        print(f"| {phase} | {f:.2f} | {b:.2f} | {b / f:.2f}x | {unit} (best of {len(rows[(phase, 'float32')])}) |")
    print(f"(features: {a.sequences} committed requests, {n_tok:,} tokens; training: {a.steps} steps of about "
          f"{step_tokens:,} tokens from the shipped drafter; answers: {a.answers} requests x 128 tokens, greedy; "
          f"{a.threads} threads)")


if __name__ == "__main__":
    main()
