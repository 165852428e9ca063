"""The shipped drafter's training data, as the public EAGLE-3 trainers recommend: chat requests
rendered with the target's own chat template, answered by the target itself, and the target's
hidden states over each whole conversation. Three resumable phases under one work folder:

1. `requests.jsonl`: `chat_seeds.training_requests`, each rendered to token ids with the chat
   template and its generation prompt (what a serving engine's chat endpoint sends);
2. `responses.jsonl`: the target's answer to each request, appended as it finishes (a restart
   skips the requests already answered). llama-server on the target's GGUF writes them when it is
   built (`make engine`; several requests at once, far faster than HF on 2 cores), else HF
   `generate`; `answer_source` names which. The labels the drafter learns are not these tokens
   but the HF target's own distribution at every position (phase 3), so a token that llama.cpp's
   Q4_1 kernels chose differently is still labelled by the target the kit serves;
3. `features/shard-NNNNN.safetensors`: per sequence the ids, where the answer starts, the fused
   aux states (fp16, HF layer ids of `eagle3_layers`), the final post-norm states (fp16) and the
   target's argmax; one shard per `shard_size` sequences, skipped when present with the same
   sequences.

Knows the target and tokenizer; nothing about the drafter or its loss (drafter_chat.py).
"""
from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from eagle_nb.model.capture import capture
from eagle_nb.train.chat_seeds import training_requests


def render(tok, messages) -> list[int]:
    """Token ids of `messages` under the tokenizer's chat template with the generation prompt."""
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tok(text, add_special_tokens=False)["input_ids"]


def requests_phase(work: Path, tok, n: int, seed: int) -> list[dict]:
    """The first `n` requests of the stream, rendered; a file holding a shorter prefix of the same
    stream (an earlier, smaller run) is extended, anything else is refused."""
    f = work / "requests.jsonl"
    have = [json.loads(line) for line in f.read_text().splitlines()] if f.is_file() else []
    if len(have) < n:
        rows = training_requests(n, seed)
        if [r["messages"] for r in have] != [r["messages"] for r in rows[:len(have)]]:
            raise ValueError(f"{f} holds {len(have)} requests that are not the start of the recipe's "
                             f"stream (seed {seed}): use another --work folder or delete this one")
        for i, r in enumerate(rows[len(have):], len(have)):
            r["id"], r["prompt_ids"] = i, render(tok, r["messages"])
        tmp = f.with_suffix(".partial")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in have + rows[len(have):]))
        tmp.replace(f)
        have = [json.loads(line) for line in f.read_text().splitlines()]
    if len(have) != n:
        raise ValueError(f"{f} holds {len(have)} requests, the recipe asks for {n}: use another "
                         f"--work folder or delete this one")
    return have


def _done(f: Path) -> dict[int, dict]:
    if not f.is_file():
        return {}
    out = {}
    for line in f.read_text().splitlines():
        try:
            r = json.loads(line)
        except ValueError:       # a line cut by an interruption: answered again
            continue
        out[r["id"]] = r
    return out


def temperature_of(i: int, sampled_every: int) -> float:
    """Most answers are greedy (what T = 0 serving sees); every `sampled_every`-th is sampled."""
    return 0.8 if sampled_every and i % sampled_every == sampled_every - 1 else 0.0


def responses_phase(work: Path, reqs: list[dict], answer, max_new: int, sampled_every: int,
                    source: str, jobs: int = 4) -> list[dict]:
    """Answer every request not yet in responses.jsonl with `answer(prompt_ids, max_new, T, seed)`
    -> answer ids (ending with the end-of-turn token when the target stopped)."""
    f = work / "responses.jsonl"
    done = _done(f)
    todo = [r for r in reqs if r["id"] not in done]
    with open(f, "a") as out, tqdm(total=len(reqs), initial=len(reqs) - len(todo),
                                   desc=f"target answers ({source})") as bar:
        def one(r):
            t = temperature_of(r["id"], sampled_every)
            return r, t, answer(r["prompt_ids"], max_new, t, r["id"])
        with ThreadPoolExecutor(jobs) as pool:
            for r, t, ids in pool.map(one, todo):
                row = {"id": r["id"], "answer_ids": ids, "temperature": t, "answer_source": source}
                out.write(json.dumps(row) + "\n")
                out.flush()
                done[r["id"]] = row
                bar.update()
    return [done[r["id"]] for r in reqs]


def hf_answer(model, eos_id: int):
    """`answer` with HF `generate`, one request at a time (the slow reference path)."""
    @torch.no_grad()
    def answer(prompt_ids, max_new, temperature, seed):
        torch.manual_seed(seed)
        x = torch.tensor([prompt_ids])
        out = model.generate(x, max_new_tokens=max_new, do_sample=temperature > 0,
                             temperature=temperature or None, top_k=0 if temperature else None,
                             top_p=None, eos_token_id=eos_id, pad_token_id=eos_id)
        return out[0, x.shape[1]:].tolist()
    return answer


def llama_answer(url: str, eos_id: int):
    """`answer` through llama-server's `/completion` (token ids in and out, plain sampling)."""
    from eagle_nb.engines.server import http_post_json

    def answer(prompt_ids, max_new, temperature, seed):
        body = {"prompt": list(prompt_ids), "n_predict": max_new, "temperature": temperature,
                "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": seed, "cache_prompt": True,
                "return_tokens": True, "stream": False}
        ids = [int(t) for t in http_post_json(url + "/completion", body)["tokens"]]
        return ids[:ids.index(eos_id) + 1] if eos_id in ids else ids
    return answer


def sequences(reqs: list[dict], answers: list[dict]) -> list[dict]:
    """One training sequence per request: prompt ids + answer ids, and where the answer starts."""
    return [{"id": r["id"], "ids": r["prompt_ids"] + a["answer_ids"], "start": len(r["prompt_ids"])}
            for r, a in zip(reqs, answers) if a["answer_ids"]]


@torch.no_grad()
def features_phase(work: Path, target, seqs: list[dict], layer_ids, shard_size: int = 64,
                   batch_tokens: int = 2048) -> list[Path]:
    """Shards of target states for `seqs` (in order), computed in length-sorted batches of about
    `batch_tokens` tokens (right-padded: a causal target's states at real positions do not see
    the padding). Existing shards are kept."""
    d = work / "features"
    d.mkdir(exist_ok=True)
    paths = []
    starts = range(0, len(seqs), shard_size)
    for s in tqdm(starts, desc="target states (shards)"):
        p = d / f"shard-{s // shard_size:05d}.safetensors"
        paths.append(p)
        if p.is_file() and shard_ids(p) == {q["id"] for q in seqs[s:s + shard_size]}:
            continue                      # a shard of a smaller run's last, partial chunk is redone
        chunk = sorted(seqs[s:s + shard_size], key=lambda q: len(q["ids"]))
        out = {}
        i = 0
        while i < len(chunk):
            n = max(1, batch_tokens // len(chunk[i]["ids"]))
            group = chunk[i:i + n]
            i += n
            T = max(len(q["ids"]) for q in group)
            x = torch.full((len(group), T), 0, dtype=torch.long)
            for b, q in enumerate(group):
                x[b, :len(q["ids"])] = torch.tensor(q["ids"])
            with capture(target, layer_ids) as states:
                hidden = target.model(x).last_hidden_state                 # (B, T, H) post-norm
            feats = states.fused()                                          # (B, T, 3H)
            argmax = target.lm_head(hidden).argmax(-1)                      # (B, T)
            for b, q in enumerate(group):
                n_tok, key = len(q["ids"]), str(q["id"])
                out[f"{key}.ids"] = torch.tensor(q["ids"], dtype=torch.int32)
                out[f"{key}.start"] = torch.tensor([q["start"]], dtype=torch.int32)
                out[f"{key}.feats"] = feats[b, :n_tok].to(torch.float16).contiguous()
                out[f"{key}.final"] = hidden[b, :n_tok].to(torch.float16).contiguous()
                out[f"{key}.argmax"] = argmax[b, :n_tok].to(torch.int32).contiguous()
        save_file(out, p.with_suffix(".partial"))
        p.with_suffix(".partial").replace(p)
    return paths


def shard_ids(path: Path) -> set[int]:
    """The sequence ids a shard holds (its header only)."""
    with safe_open(path, "pt") as f:
        return {int(k.split(".")[0]) for k in f.keys()}


def load_shards(paths) -> list[dict]:
    """Every sequence of the shards: {ids, start, feats, final, argmax}, in id order."""
    seqs = {}
    for p in paths:
        for k, v in load_file(p).items():
            key, field = k.split(".")
            seqs.setdefault(int(key), {})[field] = v
    return [dict(seqs[k], id=k) for k in sorted(seqs)]


def batches(seqs: list[dict], batch_tokens: int, seed: int) -> list[list[int]]:
    """Indices of `seqs` grouped by length into batches of about `batch_tokens` padded tokens,
    in an order fixed by `seed` (a resumed run replays the same order)."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]["ids"]))
    out, cur = [], []
    for i in order:
        if cur and (len(cur) + 1) * len(seqs[i]["ids"]) > batch_tokens:
            out.append(cur)
            cur = []
        cur.append(i)
    out.append(cur)
    random.Random(seed).shuffle(out)
    return out


def collate(seqs: list[dict], steps: int):
    """Right-padded batch: ids (B, T+steps), feats (B, T, 3H), final (B, T+steps+1, H), argmax and
    `answer` (B, T+steps+1): position p holds a token of the assistant's answer. T = S - 1."""
    S = max(len(q["ids"]) for q in seqs)
    B, T, W = len(seqs), S - 1, seqs[0]["feats"].shape[-1]
    H = seqs[0]["final"].shape[-1]
    ids = torch.zeros(B, T + steps, dtype=torch.long)
    feats = torch.zeros(B, T, W)
    final = torch.zeros(B, T + steps + 1, H)
    argmax = torch.zeros(B, T + steps + 1, dtype=torch.long)
    answer = torch.zeros(B, T + steps + 1, dtype=torch.bool)
    for b, q in enumerate(seqs):
        n = len(q["ids"])
        ids[b, :min(n, T + steps)] = q["ids"][:T + steps].long()
        feats[b, :min(n, T)] = q["feats"][:T].float()
        final[b, :n] = q["final"].float()
        argmax[b, :n] = q["argmax"].long()
        answer[b, int(q["start"]):n] = True
    return ids, feats, final, argmax, answer


def with_noise(feats: torch.Tensor, scale: float, n_aux: int, seed: int) -> torch.Tensor:
    """feats (B, T, n_aux*H) plus Gaussian noise of `scale` times each token's RMS in each captured
    layer (relative: the layers' scales differ 8x here), drawn from `seed` (a resumed run draws the
    same noise). Feature noise as EAGLE trains with, there uniform and absolute."""
    B, T, W = feats.shape
    x = feats.view(B, T, n_aux, W // n_aux)
    rms = x.pow(2).mean(-1, keepdim=True).sqrt()
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
    return (x + scale * rms * noise).view(B, T, W)
