"""The shipped drafter's recipe (train/chat_seeds.py, chat_data.py, drafter_chat.py): its prompt
source, resumable phases and answer-masked loss, on tiny models."""
import json

import pytest
import torch

from eagle_nb.io.paths import REAL
from eagle_nb.model.capture import capture
from eagle_nb.train import chat_data
from eagle_nb.train.chat_seeds import training_requests
from eagle_nb.train.drafter_chat import ChatDrafterConfig, collate, fit, ttt_loss
from eagle_nb.model.ttt import ttt_forward
from helpers import H, V, VD, tiny_drafter, tiny_llama


def _texts(rows):
    return [r["messages"][-1]["content"] for r in rows]


def test_training_requests_cover_the_domains_and_languages():
    """Deterministic in the seed, distinct, and covering code, arithmetic, explanations, chat and
    at least two languages besides English."""
    a, b = training_requests(600, seed=0), training_requests(600, seed=0)
    assert a == b and _texts(a) != _texts(training_requests(600, seed=1))
    assert len(set(_texts(a))) == 600
    assert {r["category"] for r in a} == {"code", "arithmetic", "explanation", "chat", "language"}
    foreign = {r["language"] for r in a} - {"en"}
    assert len(foreign) >= 2, foreign
    steps = [t for t in _texts(a) if "step" in t.lower()]
    assert len(steps) > 30


def test_eval_prompts_are_disjoint_from_training_requests():
    """No evaluation request (written by hand) is among the recipe's training requests or a near
    copy of one: every pair shares less than 60% of its words (Jaccard)."""
    evals = [json.loads(line)["messages"][-1]["content"] for line in REAL.prompts.read_text().splitlines()]
    train = _texts(training_requests(ChatDrafterConfig.requests, ChatDrafterConfig.seed))
    words = lambda t: set(t.lower().replace("?", " ").replace(".", " ").split())     # noqa: E731
    assert len(evals) == 16 and not set(evals) & set(train)
    for e in evals:
        closest = max(len(words(e) & words(t)) / len(words(e) | words(t)) for t in train)
        assert closest < 0.6, (e, closest)


def test_responses_resume_after_an_interruption(tmp_path):
    """An interrupted answering phase, run again, answers only what is missing (a line cut in
    half is answered again) and ends with the answers of an uninterrupted run."""
    reqs = [{"id": i, "prompt_ids": [5, i]} for i in range(12)]
    calls = []

    def answer(ids, max_new, t, seed):
        calls.append(seed)
        if len(calls) == 5 and tmp_path.joinpath("stop").exists():
            raise KeyboardInterrupt
        return [ids[-1] + 1, ids[-1] + 2, 2][:max_new]

    (tmp_path / "a").mkdir()
    clean = chat_data.responses_phase(tmp_path / "a", reqs, answer, 3, 4, "fake")
    calls.clear()
    (tmp_path / "b").mkdir()
    tmp_path.joinpath("stop").touch()
    with pytest.raises(KeyboardInterrupt):
        chat_data.responses_phase(tmp_path / "b", reqs, answer, 3, 4, "fake")
    tmp_path.joinpath("stop").unlink()
    f = tmp_path / "b" / "responses.jsonl"
    lines = f.read_text().splitlines()
    assert len(lines) == 4
    f.write_text("\n".join(lines[:3]) + "\n" + lines[3][:10])          # a line cut in half
    calls.clear()
    again = chat_data.responses_phase(tmp_path / "b", reqs, answer, 3, 4, "fake")
    assert sorted(calls) == list(range(3, 12))
    assert again == clean
    assert [r["temperature"] for r in clean].count(0.8) == 3            # every 4th sampled


def test_features_equal_the_unpadded_forward(tmp_path):
    """Shards hold, per sequence, the fused aux states, final post-norm states and argmax of a
    forward over that sequence alone (the batch's right padding changes nothing)."""
    model = tiny_llama()
    seqs = [{"id": i, "ids": list(range(3, 3 + n)), "start": 2} for i, n in enumerate([5, 9, 7, 12])]
    paths = chat_data.features_phase(tmp_path, model, seqs, [2, 4, 5], shard_size=3, batch_tokens=30)
    assert len(paths) == 2
    got = chat_data.load_shards(paths)
    for q, s in zip(seqs, got):
        x = torch.tensor([q["ids"]])
        with torch.no_grad(), capture(model, [2, 4, 5]) as st:
            out = model(x, output_hidden_states=True)
        torch.testing.assert_close(s["feats"].float(), st.fused()[0], atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(s["final"].float(), out.hidden_states[-1][0], atol=2e-3, rtol=2e-3)
        assert s["argmax"].tolist() == out.logits[0].argmax(-1).tolist()
        assert int(s["start"]) == 2 and s["ids"].tolist() == q["ids"]
    mtime = paths[0].stat().st_mtime_ns
    chat_data.features_phase(tmp_path, model, seqs, [2, 4, 5], shard_size=3, batch_tokens=30)
    assert paths[0].stat().st_mtime_ns == mtime                        # kept, not recomputed


def _seqs(n=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        L = int(torch.randint(8, 20, (1,), generator=g))
        out.append({"id": i, "ids": torch.randint(0, V, (L,), generator=g).to(torch.int32),
                    "start": torch.tensor([int(torch.randint(2, 6, (1,), generator=g))]),
                    "feats": torch.randn(L, 3 * H, generator=g).half(),
                    "final": torch.randn(L, H, generator=g).half(),
                    "argmax": torch.randint(0, V, (L,), generator=g).to(torch.int32)})
    return out


def test_loss_counts_only_answer_positions():
    """Step j counts exactly the columns whose predicted token (position t+j+2) lies in the
    answer: n - max(start, j+2) per sequence."""
    d, seqs, steps = tiny_drafter(), _seqs(4), 3
    ids, feats, final, argmax, answer = collate(seqs, steps)
    head = torch.randn(VD, H)
    outs = ttt_forward(d, ids, feats, steps)
    _, acc = ttt_loss(outs, final @ head.T, argmax, answer, d.t2d, d.t2d.nonzero().flatten())
    for j, (_, counted) in enumerate(acc):
        want = sum(max(0, len(q["ids"]) - max(int(q["start"]), j + 2)) for q in seqs)
        assert counted == want, (j, counted, want)


def test_hard_term_is_cross_entropy_to_the_targets_argmax():
    """`hard` adds, per step, that weight times the mean cross-entropy to the draft id of the
    target's argmax over the counted positions (draft ids found here by search, not cumsum)."""
    torch.manual_seed(3)
    d, seqs = tiny_drafter(), _seqs(4)
    ids, feats, final, argmax, answer = collate(seqs, 1)
    head, d2t_ids = torch.randn(VD, H), d.t2d.nonzero().flatten()
    outs = ttt_forward(d, ids, feats, 1)
    soft, _ = ttt_loss(outs, final @ head.T, argmax, answer, d.t2d, d2t_ids, count=False)
    both, _ = ttt_loss(outs, final @ head.T, argmax, answer, d.t2d, d2t_ids, count=False, hard=0.5)
    T = outs[0].shape[1]
    top, mask = argmax[:, 1:1 + T], answer[:, 2:2 + T]
    reach = mask & d.t2d[top]
    assert reach.sum() > 0
    ce = -outs[0].float().log_softmax(-1).gather(-1, torch.searchsorted(d2t_ids, top)[..., None].clamp(max=VD - 1))[..., 0]
    torch.testing.assert_close(both - soft, 0.5 * (ce * reach).sum() / reach.sum())


def test_feature_noise_is_relative_to_each_layer_and_replayable():
    """Noise of scale s on a layer chunk of RMS r has standard deviation s*r (a chunk 100x louder
    gets 100x the noise); the same seed draws the same noise, another seed other noise."""
    x = torch.ones(2, 50, 3 * 64)
    x[..., 128:] *= 100.0
    a, b = chat_data.with_noise(x, 0.1, 3, seed=5), chat_data.with_noise(x, 0.1, 3, seed=5)
    assert torch.equal(a, b) and not torch.equal(a, chat_data.with_noise(x, 0.1, 3, seed=6))
    d = (a - x).view(2, 50, 3, 64)
    assert abs(d[..., 0, :].std().item() - 0.1) < 0.01 and abs(d[..., 2, :].std().item() - 10.0) < 1.0


def test_training_resumes_to_the_same_weights(tmp_path):
    """With feature noise and the hard term, interrupted after 3 steps (last checkpoint at 2) and
    run again, training ends with the weights and log of an uninterrupted run, bit for bit; it
    lowers the loss it trains on."""
    c = ChatDrafterConfig(ttt_steps=3, batch_tokens=60, epochs=2, lr=3e-3, warmup=2, checkpoint_every=2,
                          feature_noise=0.05, hard_weight=0.3)    # the noise is replayed too
    seqs, head = _seqs(12), torch.randn(VD, H)

    def run(work, stop=None):
        torch.manual_seed(0)
        d = tiny_drafter()
        work.mkdir(exist_ok=True)
        fit(d, seqs[2:], seqs[:2], lambda f: f @ head.T, c, work, work / "log", stop_after=stop)
        return d

    a = run(tmp_path / "a")
    assert run(tmp_path / "b", stop=3) is not None
    b = run(tmp_path / "b")
    for (k, va), vb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(va, vb), k
    log = (tmp_path / "a" / "log").read_text()
    assert log == (tmp_path / "b" / "log").read_text()
    assert log.count("Train Epoch [2/2], position") == 3 and log.count("Test Epoch") == 6
    from eagle_nb.io.train_logs import read_train_log
    held = [float(line.rsplit(" ", 1)[1]) for line in log.splitlines() if line.startswith("Test Epoch [2/2]")]
    assert read_train_log(tmp_path / "a" / "log").values == pytest.approx(held)     # the doctor reads it


def test_bf16_training_forward_sees_the_current_weights(tmp_path, monkeypatch):
    """Under bf16 autocast every step's forward uses the weights the optimizer just wrote (autocast
    caches its bf16 copies of the weights for as long as its context lives: one context around
    the whole loop kept step 1's copies)."""
    from eagle_nb.train import drafter_chat
    c = ChatDrafterConfig(ttt_steps=2, batch_tokens=60, epochs=1, lr=3e-2, warmup=1,
                          checkpoint_every=100, precision="bfloat16")
    seqs, head = _seqs(10), torch.randn(VD, H)
    stale = []
    real = drafter_chat.ttt_forward

    def checked(drafter, *a, **k):
        x = torch.randn(3, H)
        got = drafter.lm_head(x)                                    # through autocast's cache
        want = x.bfloat16() @ drafter.lm_head.weight.detach().bfloat16().T
        stale.append(not torch.equal(got, want))
        return real(drafter, *a, **k)

    monkeypatch.setattr(drafter_chat, "ttt_forward", checked)
    torch.manual_seed(0)
    d = tiny_drafter()
    fit(d, seqs, [], lambda f: f @ head.T, c, tmp_path, tmp_path / "log")
    assert len(stale) >= 3 and not any(stale), stale
