"""Train the shipped EAGLE-3 drafter for SmolLM2-135M-Instruct, the way the public trainers
recommend (SafeAILab EAGLE `traineagle3`, SpecForge `train_eagle3`): the target answers chat
requests under its own template (chat_data.py), the draft vocabulary is built from the tokens the
target wrote, the loss is masked to the assistant's tokens, and training-time test unrolls
`ttt_steps` draft steps (model/ttt.py, equal to cached chain drafting).

One command with progress bars, `python -m eagle_nb.train drafter`, resumable at every phase:
the data phases keep their files under `--work`, and training saves its state every
`checkpoint_every` steps (`train_state.pt`, read back with `weights_only=True`) and continues from
it after an interruption, on the same batch order. The training log (`drafter_train.log`) is written
in SafeAILab EAGLE's line format, which `eagle-nb doctor --train-log` reads (io/train_logs.py):
`Train Epoch [e/E], position j,  Acc: a` per epoch, and `Test Epoch ...` on held-out requests.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from eagle_nb.io.paths import DATA_DIR, REAL_TARGET, SHIPPED_GGUF
from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.drafter import Eagle3Drafter
from eagle_nb.model.layers import eagle3_layers
from eagle_nb.model.ttt import ttt_forward
from eagle_nb.train import chat_data
from eagle_nb.train.chat_data import batches, collate
from eagle_nb.train.drafter import build_vocab_map
from eagle_nb.train.precision import autocast


@dataclass
class ChatDrafterConfig:
    target: str = str(REAL_TARGET)
    gguf: str = str(SHIPPED_GGUF)          # llama-server answers from it when it is built
    work: str = str(DATA_DIR / "_work" / "drafter")
    out: str = str(DATA_DIR / "drafter_eagle")
    seed: int = 0
    requests: int = 2600
    heldout_every: int = 25                # every 25th request is held out (the log's Test lines)
    max_new_tokens: int = 128
    sampled_every: int = 6                 # every 6th answer sampled at T = 0.8, the rest greedy
    answer_with: str = "auto"              # llama-server, hf, or auto (llama-server if built)
    jobs: int = 8                          # requests answered at once by llama-server (its slots)
    server_threads: int = 1                # NOTE: llama.cpp's threads spin; 2 on 2 shared cores ran 20x slower
    draft_vocab_size: int = 8192
    intermediate_size: int = 1536
    max_position_embeddings: int = 2048    # the drafter's declared context (trained on far less)
    ttt_steps: int = 5
    batch_tokens: int = 1024
    epochs: int = 3
    # more stages after the first: "requests:epochs", each continuing from the stage before with a
    # fresh optimizer and schedule on the first `requests` requests (the first stage: the first
    # stage_one_requests requests for `epochs` epochs); measured: 437 steps per epoch at 2,600
    stage_one_requests: int = 1400
    later_stages: str = "2600:1"
    lr: float = 6e-4
    warmup: int = 50
    checkpoint_every: int = 25
    acc_every: int = 1                     # the Train lines' accuracy counted on every n-th batch
    precision: str = "float32"             # or "bfloat16": autocast around each step's forward and loss
    hard_weight: float = 0.0               # > 0: plus this times cross-entropy to the target's argmax
    feature_noise: float = 0.0             # > 0: Gaussian noise this times each layer's RMS on features
    snapshot_every: int = 0                # > 0: the drafter's weights also kept every n steps
    save_dtype: str = "float16"
    threads: int = 2


def answer_fn(c: ChatDrafterConfig, target, tok):
    """(answer, source, server or None): llama-server on the GGUF when asked or available."""
    from eagle_nb.engines.llama_cpp import llama_unavailable_reason
    why = llama_unavailable_reason()
    if c.answer_with == "llama-server" and why:
        raise RuntimeError(f"--answer-with llama-server: {why}")
    if c.answer_with == "hf" or (c.answer_with == "auto" and why):
        return chat_data.hf_answer(target, tok.eos_token_id), "hf", None
    from eagle_nb.engines.llama_cpp import llama_server_binary
    from eagle_nb.engines.server import Server
    cmd = [str(llama_server_binary()), "-m", c.gguf, "--host", "127.0.0.1", "--port", "{port}",
           "-np", str(c.jobs), "-c", str(1024 * c.jobs), "-t", str(c.server_threads),
           "-tb", str(c.server_threads), "--no-webui"]
    srv = Server(c.target, "-", command=cmd, startup_timeout=300).start()
    return chat_data.llama_answer(srv.url, tok.eos_token_id), "llama-server Q4_1", srv


def new_drafter(target, d2t, t2d, c: ChatDrafterConfig, **norms: bool) -> Eagle3Drafter:
    """Shaped like the target's layers (`norms`: DrafterConfig's fc_norm or norm_before_fc);
    embedding copied and frozen; lm_head (from its rows) and the final norm start as the target's."""
    tc = target.config
    cfg = DrafterConfig(hidden_size=tc.hidden_size, num_attention_heads=tc.num_attention_heads,
                        num_key_value_heads=tc.num_key_value_heads, intermediate_size=c.intermediate_size,
                        vocab_size=tc.vocab_size, draft_vocab_size=c.draft_vocab_size,
                        target_hidden_size=tc.hidden_size, head_dim=getattr(tc, "head_dim", None),
                        rms_norm_eps=tc.rms_norm_eps, rope_theta=float(tc.rope_parameters["rope_theta"]),
                        max_position_embeddings=c.max_position_embeddings,
                        aux_layer_ids=list(eagle3_layers(tc.num_hidden_layers)), **norms)
    drafter = Eagle3Drafter(cfg)
    drafter.d2t.copy_(d2t)
    drafter.t2d.copy_(t2d)
    with torch.no_grad():
        drafter.embed_tokens.weight.copy_(target.get_input_embeddings().weight)
        drafter.lm_head.weight.copy_(target.lm_head.weight[t2d])
        drafter.norm.weight.copy_(target.model.norm.weight)      # the scale that head expects
    drafter.embed_tokens.weight.requires_grad_(False)
    return drafter


def ttt_loss(outs, draft_head_logits, argmax, answer, t2d, d2t_ids, count: bool = True, hard: float = 0.0):
    """Per step j: soft cross-entropy against the target's distribution on the draft vocabulary at
    the positions whose next token belongs to the answer (and whose target argmax the draft
    vocabulary holds), plus `hard` times the cross-entropy to that argmax, weight 0.8^j. Column t of step j predicts the token after position t+1+j.
    Returns (loss, [(hits, counted) per step]) with hits over all answer positions; with `count`
    False the accuracy's argmax is skipped and the list is empty."""
    loss, acc = 0.0, []
    T = outs[0].shape[1]
    for j, logits in enumerate(outs):
        sl = slice(1 + j, 1 + j + T)
        mask = answer[:, 2 + j:2 + j + T]                                # next token is the answer's
        top = argmax[:, sl]
        reach = mask & t2d[top]
        p = draft_head_logits[:, sl].softmax(-1)
        logp = logits.float().log_softmax(-1)
        step = -(p * logp).sum(-1)
        if hard:                       # the argmax's draft id: t2d's cumulative count, minus one
            step = step - hard * logp.gather(-1, (t2d.cumsum(0)[top] - 1).clamp(min=0)[..., None])[..., 0]
        loss = loss + 0.8 ** j * (step * reach).sum() / reach.sum().clamp(min=1)
        if not count:
            continue
        hit = (d2t_ids[logits.argmax(-1)] == top) & mask
        acc.append((int(hit.sum()), int(mask.sum())))
    return loss, acc


def parse_stages(c: ChatDrafterConfig) -> list[tuple[int, int]]:
    """[(requests, epochs)] of every stage: the first from `stage_one_requests`/`epochs`, the rest
    from `later_stages` ("2600:2,..."); each stage's requests at most `requests`, none fewer than
    the stage before."""
    out = [(min(c.stage_one_requests, c.requests), c.epochs)]
    for part in filter(None, c.later_stages.split(",")):
        try:
            n, e = (int(x) for x in part.split(":"))
        except ValueError:
            raise ValueError(f"--later-stages: {part!r} is not REQUESTS:EPOCHS") from None
        if not out[-1][0] <= n <= c.requests or e < 1:
            raise ValueError(f"--later-stages: {part!r} needs {out[-1][0]} <= requests <= "
                             f"--requests {c.requests} and epochs >= 1")
        out.append((n, e))
    return out


def lr_at(step: int, total: int, c: ChatDrafterConfig) -> float:
    return c.lr * min(1.0, (step + 1) / c.warmup) * 0.5 * (1 + math.cos(math.pi * min(step, total) / total))


@torch.no_grad()
def evaluate(drafter, seqs, head, c) -> list[float]:
    drafter.eval()
    tot = [[0, 0] for _ in range(c.ttt_steps)]
    for idx in batches(seqs, c.batch_tokens, 0):
        ids, feats, final, argmax, answer = collate([seqs[i] for i in idx], c.ttt_steps)
        with autocast(c.precision):
            outs = ttt_forward(drafter, ids, feats, c.ttt_steps)
            _, acc = ttt_loss(outs, head(final), argmax, answer, drafter.t2d, drafter.t2d.nonzero().flatten())
        tot = [[a + h, b + n] for (a, b), (h, n) in zip(tot, acc)]
    drafter.train()
    return [h / max(n, 1) for h, n in tot]


def fit(drafter, train: list[dict], held: list[dict], head, c: ChatDrafterConfig, work: Path,
        log_f: Path, stop_after: int | None = None, stage: int = 0, epoch0: int = 0,
        epochs_total: int | None = None, log_before: list[str] | None = None) -> int:
    """Training-time test over `train` for `c.epochs` epochs, resuming from `work/train_state.pt`
    (same batch order, optimizer state and noise: it ends where an uninterrupted run ends).
    `head(final)` gives the target's logits on the draft vocabulary; the EAGLE-format log lines
    go to `log_f` at the end of each epoch. `stop_after` ends
    early after that many steps in all (tests interrupt with it). A later `stage` keeps its state
    in `train_state-{stage}.pt`, numbers its epochs from `epoch0` out of `epochs_total` and writes
    its log lines after `log_before`. Returns the steps done."""
    params = [p for p in drafter.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=c.lr, betas=(0.9, 0.95), weight_decay=0.0)
    d2t_ids = drafter.t2d.nonzero().flatten()
    flat = [(e, b) for e in range(c.epochs) for b in batches(train, c.batch_tokens, c.seed + e)]
    total = len(flat)
    state_f = work / ("train_state.pt" if stage == 0 else f"train_state-{stage}.pt")
    E = epochs_total or c.epochs
    step, log_lines, epoch_acc = 0, list(log_before or []), [[0, 0] for _ in range(c.ttt_steps)]
    if state_f.is_file():
        st = torch.load(state_f, weights_only=True)
        drafter.load_state_dict(st["drafter"])
        opt.load_state_dict(st["opt"])
        step, log_lines, epoch_acc = st["step"], st["log"], st["epoch_acc"]
    bar = tqdm(total=total, initial=step, desc=f"train drafter (TTT, stage {stage + 1})")
    drafter.train()
    while step < total and (stop_after is None or step < stop_after):
        e, idx = flat[step]
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, total, c)
        ids, feats, final, argmax, answer = collate([train[i] for i in idx], c.ttt_steps)
        if c.feature_noise:
            feats = chat_data.with_noise(feats, c.feature_noise, drafter.config.num_aux, c.seed * 1_000_003 + step)
        # NOTE: autocast per step: its bf16 weight copies live as long as the context (one around
        # the loop kept step 1's weights; the saved weights' accuracy fell from 0.32 to 0.09)
        with autocast(c.precision):
            outs = ttt_forward(drafter, ids, feats, c.ttt_steps)
            loss, acc = ttt_loss(outs, head(final), argmax, answer, drafter.t2d, d2t_ids,
                                 count=step % c.acc_every == 0, hard=c.hard_weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()
        if acc:
            epoch_acc = [[a + h, b + n] for (a, b), (h, n) in zip(epoch_acc, acc)]
        step += 1
        bar.update()
        bar.set_postfix(loss=f"{loss.item():.3f}",
                        acc="/".join(f"{h / max(n, 1):.2f}" for h, n in epoch_acc))
        if step == total or flat[step][0] != e:                # end of an epoch: the log lines
            test = evaluate(drafter, held, head, c) if held else []
            log_lines += [f"Train Epoch [{epoch0 + e + 1}/{E}], position {j},  Acc: {h / max(n, 1):.4f}"
                          for j, (h, n) in enumerate(epoch_acc)]
            log_lines += [f"Test Epoch [{epoch0 + e + 1}/{E}], position {j},  Acc: {a:.4f}"
                          for j, a in enumerate(test)]
            epoch_acc = [[0, 0] for _ in range(c.ttt_steps)]
            log_f.write_text("\n".join(log_lines) + "\n")
        if c.snapshot_every and step % c.snapshot_every == 0:     # for a curve over the data seen
            torch.save(drafter.state_dict(), work / f"snapshot-{stage}-{step:06d}.pt")
        if step % c.checkpoint_every == 0 or step == total:
            torch.save({"drafter": drafter.state_dict(), "opt": opt.state_dict(), "step": step,
                        "log": log_lines, "epoch_acc": epoch_acc}, state_f.with_suffix(".partial"))
            state_f.with_suffix(".partial").replace(state_f)
    bar.close()
    drafter.eval()
    return step


def train_chat_drafter(c: ChatDrafterConfig) -> dict:
    from eagle_nb.checkpoints.save import save_drafter
    from eagle_nb.model.targets import load_target
    torch.manual_seed(c.seed)
    torch.set_num_threads(c.threads)
    t0, work, out = time.time(), Path(c.work), Path(c.out)
    for d in (work, out.parent):
        d.mkdir(parents=True, exist_ok=True)
    target, tok = load_target(c.target, device="cpu", dtype=torch.float32)
    layer_ids = list(eagle3_layers(target.config.num_hidden_layers))
    # 1-3. requests, the target's answers, its states (each phase resumes from its files)
    reqs = chat_data.requests_phase(work, tok, c.requests, c.seed)
    answer, source, server = answer_fn(c, target, tok)
    try:
        answers = chat_data.responses_phase(work, reqs, answer, c.max_new_tokens, c.sampled_every,
                                            source, jobs=c.jobs if server else 1)
    finally:
        if server:
            server.stop()
    shards = chat_data.features_phase(work, target, chat_data.sequences(reqs, answers), layer_ids)
    data_s, seqs = time.time() - t0, chat_data.load_shards(shards)
    held = [q for q in seqs if q["id"] % c.heldout_every == 0]
    train = [q for q in seqs if q["id"] % c.heldout_every != 0]
    stages = parse_stages(c)

    # 4. the draft vocabulary from the answers the target wrote (the first stage's training requests)
    first = [q for q in train if q["id"] < stages[0][0]]
    written = torch.cat([q["ids"][int(q["start"]):].long() for q in first])
    d2t, t2d, coverage = build_vocab_map(written, target.config.vocab_size, c.draft_vocab_size)
    every = torch.cat([q["ids"][int(q["start"]):].long() for q in train])
    coverage_all = float(t2d[every].float().mean())
    print(f"draft vocabulary: {c.draft_vocab_size} of {target.config.vocab_size} ids cover "
          f"{coverage:.1%} of the {len(written):,} answer tokens the target wrote in the first stage's "
          f"requests, {coverage_all:.1%} of all {len(every):,} training answer tokens")
    drafter, head_w = new_drafter(target, d2t, t2d, c), target.lm_head.weight[t2d].detach().clone()  # (Vd, H)

    # 5. training-time test, checkpointed, stage after stage
    log_f = out.parent / "drafter_train.log"
    total_epochs, steps, log, done = sum(e for _, e in stages), 0, [], 0
    for i, (n_req, n_ep) in enumerate(stages):
        part = [q for q in train if q["id"] < n_req]
        part_held = [q for q in held if q["id"] < n_req]
        steps += fit(drafter, part, part_held, lambda final: final @ head_w.T,
                     replace(c, epochs=n_ep), work, log_f, stage=i, epoch0=done,
                     epochs_total=total_epochs, log_before=log)
        done += n_ep
        log = log_f.read_text().splitlines() if log_f.is_file() else []

    # 6. format A (SafeAILab EAGLE layout; `make install` writes format C from it)
    drafter.config.aux_layer_ids = None          # format A: the EAGLE default {2, L//2, L-3}
    save_drafter(drafter, out, "eagle", dtype=getattr(torch, c.save_dtype))
    metrics = {"config": asdict(c), "layer_ids_hf": layer_ids, "answer_source": source,
               "draft_vocab_coverage": coverage, "draft_vocab_coverage_all_training": coverage_all,
               "stages": [{"requests": n, "epochs": e} for n, e in stages], "sequences": len(seqs),
               "train_sequences": len(train), "heldout_sequences": len(held),
               "answer_tokens": sum(len(q["ids"]) - int(q["start"]) for q in seqs),
               "tokens": sum(len(q["ids"]) for q in seqs), "longest_sequence": max(len(q["ids"]) for q in seqs),
               "data_time_s": round(data_s, 1), "wall_time_s_this_run": round(time.time() - t0, 1),
               "train_log": log_f.name, "train_steps": steps}
    out.parent.joinpath("drafter_metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics
