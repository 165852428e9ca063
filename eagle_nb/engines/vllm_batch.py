"""Batch answers from vLLM's offline engine, run as a program of the engine environment (it never
imports eagle_nb, and eagle_nb never imports vLLM): `ENGINE_PY vllm_batch.py --model DIR
--requests IN.jsonl --out OUT.jsonl [...]`. IN holds one `{"id", "prompt_ids", "temperature"[,
"top_p"]}` per line (ids already rendered with the chat template, or a template's prefix for the
target to write a request itself); OUT gets one `{"id", "answer_ids",
"temperature", "answer_source"}` per answered request, appended chunk by chunk, so a run that is
stopped resumes with the requests not yet in OUT (a line cut by the stop is answered again).

Greedy requests are greedy; sampled ones use plain sampling at their temperature (top-k off,
top-p 1 unless the request names one) from the engine's seed (NOTE: a per-request seed fails on vLLM 0.32's CPU build, "CPU Generator
does not use offset"; the answers are kept, so nothing needs them regenerated). Measured on 2 CPU cores: about 700 tokens/s in bfloat16 at 256
concurrent sequences, 235 in float32 (issue 34 of this project). Knows vLLM's offline API only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time


def done_ids(path: str) -> set[int]:
    out = set()
    if os.path.exists(path):
        for line in open(path):
            try:
                out.add(json.loads(line)["id"])
            except (ValueError, KeyError):
                continue
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--requests", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--max-num-seqs", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=1024)
    ap.add_argument("--eos", type=int, required=True)
    ap.add_argument("--source", default="vllm")
    a = ap.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")
    # NOTE: by default vLLM's CPU worker keeps one core for its scheduler process; offline
    # generation leaves that process idle, so every core runs the model
    os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
    reqs = [json.loads(line) for line in open(a.requests)]
    have = done_ids(a.out)
    todo = [r for r in reqs if r["id"] not in have]
    print(f"vllm_batch: {len(reqs)} requests, {len(have)} answered, {len(todo)} to do", flush=True)
    if not todo:
        return 0
    # NOTE: this file's folder is sys.path[0] and holds the kit's own vllm.py: drop it first
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    from vllm import LLM, SamplingParams
    llm = LLM(model=a.model, dtype=a.dtype, max_num_seqs=a.max_num_seqs, max_model_len=2048,
              enforce_eager=True, seed=0)
    with open(a.out, "a") as out:
        for s in range(0, len(todo), a.chunk):
            chunk, t0 = todo[s:s + a.chunk], time.time()
            params = [SamplingParams(max_tokens=a.max_new_tokens, temperature=r["temperature"],
                                     top_p=r.get("top_p", 1.0),
                                     stop_token_ids=[a.eos], detokenize=False)
                      for r in chunk]
            prompts = [{"prompt_token_ids": r["prompt_ids"]} for r in chunk]
            res = llm.generate(prompts, params, use_tqdm=False)
            n_tok = 0
            for r, o in zip(chunk, res):
                ids = list(o.outputs[0].token_ids)
                n_tok += len(ids)
                out.write(json.dumps({"id": r["id"], "answer_ids": ids, "temperature": r["temperature"],
                                      "answer_source": a.source}) + "\n")
            out.flush()
            dt = time.time() - t0
            print(f"vllm_batch: {len(have) + s + len(chunk)}/{len(reqs)} answered, "
                  f"{n_tok / dt:.0f} tokens/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
