"""Recipe 3 of the shipped drafter: the broad request stream (request_mix.py) answered in batches
by vLLM's offline engine in the engine environment (engines/vllm_batch.py, a process boundary),
the target's states computed under the precision the machine measures (precision.py), a draft
vocabulary from every training answer, and training-time test warm-started from the shipped
drafter (its rows re-indexed into the new vocabulary). Every phase resumes from its files under
`--work`; what a later run cannot regenerate cheaply, the requests and the target's answers, is
also written compactly under `data/drafter_data/` (committed): a request from a packaged corpus
as its pinned name and record index, a written one as its text, an answer as its token ids.

`python -m eagle_nb.train drafter-scale --answered N` trains on the first N answered requests;
`--first M` on requests M to N only (a warm start trained on the first M goes on with new ones).
Knows the recipe's phases; the loss, the fit loop and the features are drafter_chat.py's and
chat_data.py's.
"""
from __future__ import annotations

import gzip
import json
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from eagle_nb.io.paths import DATA_DIR, REAL, REAL_TARGET
from eagle_nb.model.layers import eagle3_layers
from eagle_nb.train import chat_data, precision, self_requests
from eagle_nb.train.drafter import build_vocab_map
from eagle_nb.train.drafter_chat import ChatDrafterConfig, fit
from eagle_nb.train.request_mix import mixed_requests, request_text
from eagle_nb.train.warm_start import warm_drafter

COMMITTED = DATA_DIR / "drafter_data"


@dataclass
class ScaleConfig:
    target: str = str(REAL_TARGET)
    work: str = str(DATA_DIR / "_work" / "drafter3")
    out: str = str(DATA_DIR / "drafter_eagle")
    warm_start: str = str(DATA_DIR / "drafter_eagle")     # "" trains from the target's rows
    seed: int = 0
    requests: int = 25000          # the stream's length (answered in order)
    self_requests: int = 2560      # then this many requests the target writes itself (Magpie)
    answered: int = 6144           # train on the first `answered` requests
    first: int = 0                 # ... from request `first` on (a warm start's next, unseen requests)
    heldout_every: int = 25
    max_new_tokens: int = 128
    sampled_every: int = 6
    # 0: keep the warm start's vocabulary. NOTE: grown to 16,384 ids from the 8,192-id drafter,
    # the new ids' rows (the target's) outscored the trained ones: top-1 agreement with the warm
    # start fell to 0.14 and held-out accuracy to 0.0 before the first step (measured)
    draft_vocab_size: int = 0
    new_row_scale: float = 1.0     # the new ids' rows: the target's head rows times this
    fc_norm: bool = False          # one RMSNorm per captured layer before fc (EAGLE 3.1)
    norm_before_fc: bool = False   # one RMSNorm over the three captured layers before fc
    intermediate_size: int = 1536  # the draft layer's MLP (wider than the warm start's: padded)
    hard_weight: float = 0.0       # > 0: plus this times cross-entropy to the target's argmax
    feature_noise: float = 0.0     # > 0: Gaussian noise this times each layer's RMS on features
    ttt_steps: int = 5
    batch_tokens: int = 1024
    epochs: int = 1
    lr: float = 3e-4
    warmup: int = 30
    checkpoint_every: int = 25
    acc_every: int = 4             # the Train lines' accuracy on every 4th batch (its argmax costs ~9%)
    snapshot_every: int = 250      # weights kept every n steps: tau against the requests seen
    precision: str = "auto"        # auto (measured), float32 or bfloat16, for features and training
    threads: int = 2


def requests_phase(c: ScaleConfig, tok) -> list[dict]:
    """The stream's first `c.requests` requests, then `c.self_requests` the target wrote itself
    (ids from `c.requests` on), rendered with the chat template (work file)."""
    f = Path(c.work) / "requests.jsonl"
    if f.is_file():
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        if len(rows) == c.requests + c.self_requests:
            return rows
    rows = mixed_requests(c.requests, c.seed)
    if c.self_requests:
        rows += [{"source": {"text": t, "by": self_requests.SOURCE}, "category": "self", "language": "en",
                  "messages": [{"role": "user", "content": t}]} for t in _self_written(c, tok)]
    for i, r in enumerate(rows):
        r["id"], r["prompt_ids"] = i, chat_data.render(tok, r["messages"])
    tmp = f.with_suffix(".partial")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    tmp.replace(f)
    return rows


def _self_written(c: ScaleConfig, tok) -> list[str]:
    """The target's own requests: those committed (after the stream's), else written by vLLM."""
    committed = []
    if (COMMITTED / "requests.jsonl.gz").is_file():
        committed = [r["source"]["text"] for r in read_committed(texts=False)[0]
                     if r["source"].get("by") == self_requests.SOURCE]
    evals = [json.loads(line)["messages"][-1]["content"] for line in REAL.prompts.read_text().splitlines()]
    return self_requests.written_requests(Path(c.work), tok, tok.eos_token_id, c.self_requests, evals,
                                          lambda inp, out, n: _vllm_batch(c, inp, out, tok.eos_token_id, n),
                                          committed)


def _vllm_batch(c: ScaleConfig, inp: Path, out: Path, eos: int, max_new_tokens: int) -> None:
    from eagle_nb.engines.server import engine_python
    script = Path(__file__).resolve().parents[1] / "engines" / "vllm_batch.py"
    subprocess.run([str(engine_python()), str(script), "--model", c.target, "--requests", str(inp),
                    "--out", str(out), "--eos", str(eos), "--max-new-tokens", str(max_new_tokens),
                    "--source", "vllm bf16"], check=True)


def answers_phase(c: ScaleConfig, reqs: list[dict], eos: int, upto: int) -> list[dict]:
    """The target's answers to the first `upto` requests: vLLM's offline engine in the engine
    environment writes `responses.jsonl` (resumed where it stopped)."""
    work = Path(c.work)
    out = work / "responses.jsonl"
    done = chat_data._done(out)
    if any(r["id"] not in done for r in reqs[:upto]) and (COMMITTED / "answers.jsonl.gz").is_file():
        print(f"answers restored from {COMMITTED}: {restore_committed(out, reqs[:upto], done)}")
        done = chat_data._done(out)
    if any(r["id"] not in done for r in reqs[:upto]):
        inp = work / "to_answer.jsonl"
        inp.write_text("".join(json.dumps({"id": r["id"], "prompt_ids": r["prompt_ids"],
                                           "temperature": chat_data.temperature_of(r["id"], c.sampled_every)}) + "\n"
                               for r in reqs[:upto]))
        _vllm_batch(c, inp, out, eos, c.max_new_tokens)
        done = chat_data._done(out)
    missing = [r["id"] for r in reqs[:upto] if r["id"] not in done]
    if missing:
        raise RuntimeError(f"{out}: {len(missing)} of the first {upto} requests have no answer "
                           f"(first: {missing[:5]}); run the recipe again to answer them")
    return [done[r["id"]] for r in reqs[:upto]]


def write_committed(reqs: list[dict], answers: list[dict], folder: Path = COMMITTED) -> bool:
    """requests.jsonl.gz (source, category, language) and answers.jsonl.gz (id, ids, T); files
    already holding as many answers or more (a run trained on a prefix) are kept. Returns whether
    it wrote."""
    have = folder / "answers.jsonl.gz"
    if have.is_file():
        with gzip.open(have, "rt") as f:
            if sum(1 for _ in f) >= len(answers):
                return False
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(folder / "requests.jsonl.gz", "wt", encoding="utf-8") as f:
        for r in reqs:
            f.write(json.dumps({"id": r["id"], "source": r["source"], "category": r["category"],
                                "language": r["language"]}, ensure_ascii=False) + "\n")
    with gzip.open(folder / "answers.jsonl.gz", "wt") as f:
        for a in answers:
            f.write(json.dumps({"id": a["id"], "ids": a["answer_ids"], "t": a["temperature"]}) + "\n")
    return True


def read_committed(folder: Path = COMMITTED, texts: bool = True) -> tuple[list[dict], dict[int, dict]]:
    """The committed requests (texts regenerated from their sources unless `texts=False`: ids,
    sources and labels only) and answers by id."""
    with gzip.open(folder / "requests.jsonl.gz", "rt", encoding="utf-8") as f:
        reqs = [json.loads(line) for line in f]
    for r in reqs if texts else ():
        r["messages"] = [{"role": "user", "content": request_text(r)}]
    with gzip.open(folder / "answers.jsonl.gz", "rt") as f:
        answers = {a["id"]: {"id": a["id"], "answer_ids": a["ids"], "temperature": a["t"]}
                   for a in map(json.loads, f)}
    return reqs, answers


def restore_committed(out: Path, reqs: list[dict], done: dict, folder: Path = COMMITTED) -> int:
    """Append to `out` the committed answers of `reqs` it lacks (a new machine answers only what
    was never committed). A committed request whose source differs from the stream's request of
    the same id is refused: the stream changed, its answers belong to other requests."""
    committed, answers = read_committed(folder)
    by_id = {r["id"]: r for r in committed}
    lines = []
    for r in reqs:
        if r["id"] in done or r["id"] not in answers:
            continue
        was = by_id.get(r["id"])
        if was is None or was["source"] != r["source"]:
            raise ValueError(f"{folder / 'requests.jsonl.gz'}: request {r['id']} is {was and was['source']!r}, "
                             f"the stream's is {r['source']!r}: the request stream changed since the answers "
                             f"were committed (same --seed? same corpora?)")
        lines.append(json.dumps(dict(answers[r["id"]], answer_source=f"committed ({folder.name})")) + "\n")
    cut = out.is_file() and out.stat().st_size and not out.read_bytes().endswith(b"\n")
    with open(out, "a") as f:
        f.writelines(["\n"] * bool(cut) + lines)      # a line cut by a stop stays apart
    return len(lines)


def warm_vocab(c: ScaleConfig, target) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) of the warm start."""
    from eagle_nb.checkpoints.load import load_drafter
    if not c.warm_start:
        raise ValueError("--draft-vocab-size 0 keeps the warm start's vocabulary: give --warm-start")
    old = load_drafter(c.warm_start, target, dtype=torch.float32)
    return old.d2t.clone(), old.t2d.clone()


def train_scaled(c: ScaleConfig) -> dict:
    from eagle_nb.checkpoints.save import save_drafter
    from eagle_nb.model.targets import load_target
    if not 0 <= c.first < c.answered:
        raise ValueError(f"--first {c.first} --answered {c.answered}: trains on requests first..answered-1, "
                         f"so first must be at least 0 and below answered")
    torch.manual_seed(c.seed)
    torch.set_num_threads(c.threads)
    t0, work, out = time.time(), Path(c.work), Path(c.out)
    work.mkdir(parents=True, exist_ok=True)
    dtype, why = precision.choose(c.precision)
    print(why)
    target, tok = load_target(c.target, device="cpu", dtype=torch.float32)
    layer_ids = list(eagle3_layers(target.config.num_hidden_layers))
    times = {}

    reqs = requests_phase(c, tok)
    answers = answers_phase(c, reqs, tok.eos_token_id, c.answered)
    write_committed(reqs[:c.answered], answers)
    times["answers_s"] = round(time.time() - t0, 1)
    t1 = time.time()
    with precision.autocast(dtype):
        shards = chat_data.features_phase(work, target, chat_data.sequences(reqs[c.first:c.answered],
                                                                            answers[c.first:]), layer_ids)
    times["features_s"] = round(time.time() - t1, 1)
    seqs = chat_data.load_shards(shards)
    held = [q for q in seqs if q["id"] % c.heldout_every == 0]
    train = [q for q in seqs if q["id"] % c.heldout_every != 0]

    written = torch.cat([q["ids"][int(q["start"]):].long() for q in train])
    if c.draft_vocab_size:
        d2t, t2d, coverage = build_vocab_map(written, target.config.vocab_size, c.draft_vocab_size)
    else:
        d2t, t2d = warm_vocab(c, target)
        coverage = float(t2d[written].float().mean())
    held_tok = torch.cat([q["ids"][int(q["start"]):].long() for q in held])
    coverage_held = float(t2d[held_tok].float().mean())
    print(f"draft vocabulary {int(t2d.sum())}: {coverage:.1%} of {len(written):,} training answer "
          f"tokens, {coverage_held:.1%} of {len(held_tok):,} held-out ones")
    drafter = warm_drafter(c.warm_start, target, d2t, t2d, c.new_row_scale, c.fc_norm, train,
                           c.norm_before_fc, c.intermediate_size)
    head_w = target.lm_head.weight[t2d].detach().clone()
    t2 = time.time()
    cc = ChatDrafterConfig(ttt_steps=c.ttt_steps, batch_tokens=c.batch_tokens, epochs=c.epochs, lr=c.lr,
                           warmup=c.warmup, checkpoint_every=c.checkpoint_every, seed=c.seed,
                           acc_every=c.acc_every, snapshot_every=c.snapshot_every, precision=dtype,
                           hard_weight=c.hard_weight, feature_noise=c.feature_noise)
    log_f = out.parent / "drafter_train.log"
    steps = fit(drafter, train, held, lambda final: final @ head_w.T, cc, work,
                work / "drafter_train.log")
    times["train_s"] = round(time.time() - t2, 1)
    out.parent.mkdir(parents=True, exist_ok=True)     # an --out under a folder not made yet
    log_f.write_text((work / "drafter_train.log").read_text())
    drafter.config.aux_layer_ids = None
    save_drafter(drafter, out, "eagle", dtype=torch.float16)
    metrics = {"recipe": "drafter-scale", "config": asdict(c), "precision": dtype, "precision_why": why,
               "layer_ids_hf": layer_ids, "answer_source": "vllm bf16", "sequences": len(seqs),
               "train_sequences": len(train), "heldout_sequences": len(held),
               "draft_vocab_coverage": coverage, "draft_vocab_coverage_heldout": coverage_held,
               "answer_tokens": len(written) + len(held_tok), "tokens": sum(len(q["ids"]) for q in seqs),
               "train_steps": steps, "phase_seconds": times, "train_log": log_f.name}
    out.parent.joinpath("drafter_metrics.json").write_text(json.dumps(metrics, indent=2))
    return metrics
