"""Train the shipped target: a stock `LlamaForCausalLM` on Python standard-library source.

Phases: (1) split the corpus by file, (2) train a byte-level BPE tokenizer on the training split,
(3) pack token streams, (4) train with AdamW + cosine schedule, (5) measure held-out loss against a
unigram baseline, (6) save with `save_pretrained` (safetensors) plus the evaluation prompts, a
held-out text sample for tests, and a metrics JSON that data/README.md quotes.

Knows nothing about EAGLE; the drafter is trained in `drafter.py`.
"""
from __future__ import annotations

import json
import math
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from eagle_nb.train import corpus


@dataclass
class TargetTrainConfig:
    out: str = "data/code_pair/target"
    seed: int = 0
    vocab_size: int = 4096
    hidden_size: int = 192
    intermediate_size: int = 512
    num_hidden_layers: int = 8
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    seq_len: int = 256
    batch_size: int = 16
    steps: int = 2000
    lr: float = 2e-3
    min_lr_frac: float = 0.1
    warmup: int = 100
    weight_decay: float = 0.1
    eval_windows: int = 200
    threads: int = 2


def build_config(c: TargetTrainConfig, tokenizer):
    from transformers import LlamaConfig
    eos = tokenizer.eos_token_id
    return LlamaConfig(vocab_size=len(tokenizer), hidden_size=c.hidden_size,
                       intermediate_size=c.intermediate_size, num_hidden_layers=c.num_hidden_layers,
                       num_attention_heads=c.num_attention_heads,
                       num_key_value_heads=c.num_key_value_heads, max_position_embeddings=1024,
                       rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                       bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)


def lr_at(step: int, c: TargetTrainConfig) -> float:
    if step < c.warmup:
        return c.lr * (step + 1) / c.warmup
    t = (step - c.warmup) / max(1, c.steps - c.warmup)
    return c.lr * (c.min_lr_frac + (1 - c.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * t)))


@torch.no_grad()
def eval_loss(model, ids: torch.Tensor, seq_len: int, n_windows: int) -> float:
    """Mean next-token loss over the first n non-overlapping windows of `ids`."""
    model.eval()
    losses = []
    for i in range(min(n_windows, (len(ids) - 1) // seq_len)):
        x = ids[i * seq_len:(i + 1) * seq_len + 1].unsqueeze(0)
        losses.append(_next_token_loss(model, x))
    model.train()
    return sum(losses) / len(losses)


def _next_token_loss(model, x: torch.Tensor) -> float:
    logits = model(input_ids=x[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits[0], x[0, 1:]).item()


def unigram_loss(train_ids: torch.Tensor, eval_ids: torch.Tensor, vocab: int) -> float:
    """Cross-entropy of an add-one-smoothed unigram model fitted on the training tokens."""
    counts = torch.bincount(train_ids, minlength=vocab).double() + 1.0
    logp = (counts / counts.sum()).log()
    return float(-logp[eval_ids].mean())


def train_target(c: TargetTrainConfig) -> dict:
    from transformers import LlamaForCausalLM
    torch.manual_seed(c.seed)
    torch.set_num_threads(c.threads)
    out = Path(c.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    # 1-2. split and tokenizer
    train_files, held_files = corpus.split_files()
    tok = corpus.train_tokenizer([t for _, t in train_files], c.vocab_size, out)
    # 3. token streams
    train_ids = torch.tensor(corpus.encode_files(tok, train_files), dtype=torch.long)
    val_ids = torch.tensor(corpus.encode_files(tok, held_files), dtype=torch.long)
    print(f"train files {len(train_files)} ({len(train_ids):,} tokens); "
          f"held-out files {len(held_files)} ({len(val_ids):,} tokens)")

    # 4. train
    model = LlamaForCausalLM(build_config(c, tok))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": c.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=c.lr, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(c.seed)
    model.train()
    bar = tqdm(range(c.steps), desc="train target")
    ema = None
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = lr_at(step, c)
        starts = torch.randint(0, len(train_ids) - c.seq_len - 1, (c.batch_size,), generator=g)
        x = torch.stack([train_ids[s:s + c.seq_len + 1] for s in starts.tolist()])
        logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                 x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        bar.set_postfix(loss=f"{ema:.3f}")
    train_time = time.time() - t0

    # 5. measure
    val_loss = eval_loss(model, val_ids, c.seq_len, c.eval_windows)
    train_loss = eval_loss(model, train_ids, c.seq_len, c.eval_windows)
    n_eval = min(c.eval_windows, (len(val_ids) - 1) // c.seq_len) * c.seq_len
    uni = unigram_loss(train_ids, val_ids[1:n_eval + 1], len(tok))
    model.eval()

    # 6. save
    model.save_pretrained(out, safe_serialization=True)
    prompts = corpus.make_prompts(held_files, n=16)
    corpus.write_jsonl(prompts, out.parent / "eval_prompts.jsonl")
    sample = "".join(t + "\n" for _, t in held_files[:6])[:120_000]
    (out.parent / "heldout_sample.txt").write_text(sample)
    sample_ids = tok(sample, add_special_tokens=False, return_tensors="pt")["input_ids"][0]
    sample_loss = eval_loss(model, sample_ids, c.seq_len, c.eval_windows)
    continuations = []
    for p in prompts[:3]:
        ids = tok(p["prompt"], return_tensors="pt")["input_ids"]
        with torch.no_grad():
            gen = model.generate(ids, max_new_tokens=48, do_sample=False)
        continuations.append({"prompt": p["prompt"], "continuation": tok.decode(gen[0, ids.shape[1]:])})
    metrics = {
        "config": asdict(c),
        "params": sum(p.numel() for p in model.parameters()),
        "train_files": len(train_files), "heldout_files": len(held_files),
        "train_tokens": len(train_ids), "heldout_tokens": len(val_ids),
        "tokens_seen": c.steps * c.batch_size * c.seq_len,
        "wall_time_s": round(train_time, 1),
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads",
        "python_stdlib": str(corpus.stdlib_root()), "python": platform.python_version(),
        "train_loss": train_loss, "train_ppl": math.exp(train_loss),
        "val_loss": val_loss, "val_ppl": math.exp(val_loss),
        "unigram_val_ppl": math.exp(uni), "ppl_ratio_vs_unigram": math.exp(val_loss) / math.exp(uni),
        "heldout_sample_ppl": math.exp(sample_loss),
        "continuations": continuations,
    }
    (out.parent / "target_metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics
