"""Train an EAGLE-3 drafter for a target with training-time test (TTT), as EAGLE-3 does.

Phases: (1) the target writes continuations of training-split prompts (half greedy, half sampled),
(2) d2t/t2d from token frequencies the way the public builders do (top Vd ids, sorted; offsets),
(3) TTT: `steps` unrolled draft steps, step j feeding the drafter's own step j-1 states back,
each position attending to the target-fed prefix plus its own earlier draft steps (exactly the
cache layout at inference), soft cross-entropy against the target distribution on the draft vocab,
step weights 0.8^j, (4) save in formats A and C with a metrics JSON.

Target features are captured online with `capture`; nothing is stored on disk.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from eagle_nb.model.capture import capture
from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.drafter import Eagle3Drafter
from eagle_nb.model.layers import eagle3_layers
from eagle_nb.model.ttt import ttt_forward  # noqa: F401 - the trainer's TTT, re-exported
from eagle_nb.train import corpus


@dataclass
class DrafterTrainConfig:
    target: str = "data/code_pair/target"
    out_eagle: str = "data/code_pair/drafter_eagle"
    out_speculators: str = "data/code_pair/drafter_speculators"
    seed: int = 0
    draft_vocab_size: int = 2048
    intermediate_size: int = 512
    gen_sequences: int = 3072
    gen_prompt_len: int = 64
    gen_new_tokens: int = 192
    gen_batch: int = 64
    greedy_fraction: float = 0.75    # share of generation batches decoded greedily (rest: T=1)
    ttt_steps: int = 5
    batch_size: int = 8
    train_steps: int = 1500
    lr: float = 1e-3
    warmup: int = 50
    save_dtype: str = "float16"
    threads: int = 2


# -- (1) data --------------------------------------------------------------------------------------
@torch.no_grad()
def generate_data(model, train_ids: torch.Tensor, c: DrafterTrainConfig, g: torch.Generator):
    seqs = []
    n_batches = math.ceil(c.gen_sequences / c.gen_batch)
    for b in tqdm(range(n_batches), desc="target writes training text"):
        starts = torch.randint(0, len(train_ids) - c.gen_prompt_len, (c.gen_batch,), generator=g)
        prompts = torch.stack([train_ids[s:s + c.gen_prompt_len] for s in starts.tolist()])
        f = 1.0 - c.greedy_fraction  # spread the sampled batches evenly
        sample = int((b + 1) * f) > int(b * f)
        out = model.generate(prompts, max_new_tokens=c.gen_new_tokens, min_new_tokens=c.gen_new_tokens,
                             do_sample=sample, temperature=1.0 if sample else None, top_k=0 if sample else None,
                             top_p=None, pad_token_id=model.config.eos_token_id)
        seqs.append(out)
    return torch.cat(seqs)[: c.gen_sequences]


@torch.no_grad()
def precompute_target(target, data: torch.Tensor, layer_ids, T: int, batch: int = 16):
    """Fused aux features (N, T, n*H) of tokens 0..T-1 and the final post-norm states (N, S, H),
    from which the target's logits are one matmul away."""
    feats, finals = [], []
    for i in tqdm(range(0, len(data), batch), desc="target features"):
        with capture(target, layer_ids) as states:
            out = target(data[i:i + batch], output_hidden_states=True)
        feats.append(states.fused()[:, :T].clone())
        finals.append(out.hidden_states[-1].clone())
    return torch.cat(feats), torch.cat(finals)


# -- (2) vocabulary mapping ------------------------------------------------------------------------
def build_vocab_map(token_ids: torch.Tensor, vocab_size: int, draft_vocab_size: int):
    """Top-Vd ids by frequency (ties by lower id, zero-count ids padded), sorted ascending.
    Returns (d2t offsets int64 (Vd,), t2d bool (V,), coverage of the counted tokens)."""
    counts = torch.bincount(token_ids.flatten(), minlength=vocab_size)
    order = sorted(range(vocab_size), key=lambda i: (-int(counts[i]), i))[:draft_vocab_size]
    selected = torch.tensor(sorted(order), dtype=torch.long)
    d2t = selected - torch.arange(draft_vocab_size)
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[selected] = True
    coverage = float(counts[selected].sum() / counts.sum())
    return d2t, t2d, coverage


# -- (3) training-time test ------------------------------------------------------------------------
def ttt_loss(outs, target_logits, t2d, T: int):
    """Soft CE per step against the target distribution restricted to the draft vocab, masking
    positions whose target argmax is outside it. target_logits (B, T+steps, V): position p
    predicts token p+1. Returns (weighted loss, accuracy per step)."""
    loss, accs = 0.0, []
    d2t_ids = t2d.nonzero().flatten()
    for j, logits in enumerate(outs):
        tl = target_logits[:, 1 + j:1 + j + T]                          # (B, T, V)
        mask = t2d[tl.argmax(-1)]                                       # reachable positions
        p = tl[..., d2t_ids].float().softmax(-1)
        lp = logits.float().log_softmax(-1)
        step_loss = -(p * lp).sum(-1)
        loss = loss + 0.8 ** j * (step_loss * mask).sum() / mask.sum().clamp(min=1)
        hit = (d2t_ids[logits.argmax(-1)] == tl.argmax(-1)).float()
        accs.append(float(hit.mean()))
    return loss, accs


def train_drafter(c: DrafterTrainConfig) -> dict:
    from eagle_nb.checkpoints.save import save_drafter
    from eagle_nb.model.targets import load_target
    torch.manual_seed(c.seed)
    torch.set_num_threads(c.threads)
    g = torch.Generator().manual_seed(c.seed)
    t0 = time.time()
    target, tok = load_target(c.target, device="cpu")
    L, H = target.config.num_hidden_layers, target.config.hidden_size
    layer_ids = list(eagle3_layers(L))

    # 1. data: target-written continuations of training-split text
    train_files, _ = corpus.split_files()
    train_ids = torch.tensor(corpus.encode_files(tok, train_files), dtype=torch.long)
    data = generate_data(target, train_ids, c, g)
    gen_time = time.time() - t0

    # 2. vocabulary map from the target's own tokens (the generated part)
    d2t, t2d, coverage = build_vocab_map(data[:, c.gen_prompt_len:], target.config.vocab_size,
                                         c.draft_vocab_size)
    cfg = DrafterConfig(hidden_size=H, num_attention_heads=target.config.num_attention_heads,
                        num_key_value_heads=target.config.num_key_value_heads,
                        intermediate_size=c.intermediate_size, vocab_size=target.config.vocab_size,
                        draft_vocab_size=c.draft_vocab_size, target_hidden_size=H,
                        head_dim=getattr(target.config, "head_dim", None),
                        rms_norm_eps=target.config.rms_norm_eps, rope_theta=10000.0,
                        max_position_embeddings=target.config.max_position_embeddings,
                        aux_layer_ids=layer_ids)
    drafter = Eagle3Drafter(cfg)
    drafter.d2t.copy_(d2t)
    drafter.t2d.copy_(t2d)
    with torch.no_grad():  # frozen target embedding; lm_head initialised from the target's rows
        drafter.embed_tokens.weight.copy_(target.get_input_embeddings().weight)
        drafter.lm_head.weight.copy_(target.lm_head.weight[t2d])
    drafter.embed_tokens.weight.requires_grad_(False)
    params = [p for p in drafter.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=c.lr, betas=(0.9, 0.95), weight_decay=0.0)

    # 3. TTT, on target features and final (post-norm) states computed once for all sequences
    T = data.shape[1] - c.ttt_steps - 1
    feats_all, final_all = precompute_target(target, data, layer_ids, T)
    bar = tqdm(range(c.train_steps), desc="train drafter (TTT)")
    acc_ema = None
    drafter.train()
    for step in bar:
        lr = c.lr * min(1.0, (step + 1) / c.warmup) * 0.5 * (1 + math.cos(math.pi * step / c.train_steps))
        for grp in opt.param_groups:
            grp["lr"] = lr
        idx = torch.randint(0, len(data), (c.batch_size,), generator=g)
        batch, feats = data[idx], feats_all[idx]
        with torch.no_grad():
            target_logits = target.lm_head(final_all[idx])            # (B, T+steps+1, V)
        outs = ttt_forward(drafter, batch, feats, c.ttt_steps)
        loss, accs = ttt_loss(outs, target_logits, drafter.t2d, T)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        acc_ema = accs if acc_ema is None else [0.95 * a + 0.05 * b for a, b in zip(acc_ema, accs)]
        bar.set_postfix(loss=f"{loss.item():.3f}", acc="/".join(f"{a:.2f}" for a in acc_ema))
    drafter.eval()

    # 4. save (A: EAGLE layout, ids implicit; C: speculators, ids explicit)
    dtype = getattr(torch, c.save_dtype)
    save_drafter(drafter, c.out_speculators, "speculators", dtype=dtype, verifier=c.target)
    drafter.config.aux_layer_ids = None       # format A: the EAGLE default {2, L//2, L-3}
    save_drafter(drafter, c.out_eagle, "eagle", dtype=dtype)
    metrics = {"config": asdict(c), "layer_ids_hf": layer_ids, "draft_vocab_coverage": coverage,
               "generated_tokens": int(data.numel()), "generation_time_s": round(gen_time, 1),
               "wall_time_s": round(time.time() - t0, 1),
               "train_accuracy_per_step_ema": acc_ema, "final_loss": float(loss)}
    Path(c.out_eagle).parent.joinpath("drafter_metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics
