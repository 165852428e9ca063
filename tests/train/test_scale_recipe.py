"""Recipe 3 of the shipped drafter (train/request_mix.py, corpora.py, precision.py,
drafter_scale.py, engines/vllm_batch.py): the broad request stream, its pinned corpora, the
measured precision choice, the committed request/answer files and the warm start."""
import collections
import json

import pytest
import torch

from eagle_nb.engines import vllm_batch
from eagle_nb.io.paths import REAL
from eagle_nb.train import corpora, drafter_scale, precision
from eagle_nb.train import chat_data
from eagle_nb.train.drafter_scale import read_committed, restore_committed, write_committed
from eagle_nb.model.drafter import Eagle3Drafter
from eagle_nb.train.warm_start import chunk_rms, fold_fc_norm, warm_vocab_rows
from helpers import tiny_drafter_config
from eagle_nb.train.request_mix import LANGS, mixed_requests, request_text

N = 6000


@pytest.fixture(scope="module")
def stream():
    return mixed_requests(N, seed=0)


def _words(t):
    return set(t.lower().replace("?", " ").replace(".", " ").replace(",", " ").split())


def test_stream_is_deterministic_distinct_and_broad(stream):
    """The same seed gives the same stream, another seed another; requests are distinct; every
    category is present and each of the five other languages holds at least 5%."""
    assert [r["source"] for r in mixed_requests(500, 0)] == [r["source"] for r in stream[:500]]
    assert [r["source"] for r in mixed_requests(200, 1)] != [r["source"] for r in stream[:200]]
    texts = [r["messages"][0]["content"] for r in stream]
    assert len(set(texts)) == N
    cats = collections.Counter(r["category"] for r in stream)
    assert set(cats) == {"chat", "explanation", "code", "arithmetic", "language"}, cats
    langs = collections.Counter(r["language"] for r in stream)
    for lang in LANGS:
        assert langs[lang] >= 0.05 * N, (lang, langs)
    assert sum("corpus" in r["source"] for r in stream) > 0.3 * N       # packaged corpora used


def test_stored_rows_regenerate_their_text(stream):
    """A request stored as (corpus, index) or as text gives back the exact user turn."""
    for r in stream[:800]:
        stored = json.loads(json.dumps({"source": r["source"]}))
        assert request_text(stored) == r["messages"][0]["content"]


def test_eval_prompts_stay_disjoint_from_the_stream(stream):
    """No evaluation request is in the stream or shares 60% or more of its words with one."""
    evals = [json.loads(line)["messages"][-1]["content"] for line in REAL.prompts.read_text().splitlines()]
    train = [_words(r["messages"][0]["content"]) for r in stream]
    for e in evals:
        we = _words(e)
        closest = max(len(we & w) / len(we | w) for w in train)
        assert closest < 0.6, (e, closest)


def test_a_corpus_off_its_pin_is_refused(monkeypatch):
    """A corpus whose installed version or file hash differs from the pin gets an error naming
    the package and the command that installs the pinned one."""
    corpora.corpus_path("chitchat")                                     # the pinned one passes
    pin = corpora.PINS["chitchat"]
    monkeypatch.setitem(corpora.PINS, "chitchat", corpora.Pin(pin.package, "9.9.9", pin.license,
                                                               pin.files, pin.sha256))
    with pytest.raises(corpora.CorpusError, match=r"chitchat-dataset is version 0\.9\.0.*pip install "
                                                  r"chitchat-dataset==9\.9\.9"):
        corpora.corpus_path("chitchat")
    monkeypatch.setitem(corpora.PINS, "chitchat", corpora.Pin(pin.package, pin.version, pin.license,
                                                               pin.files, "0" * 64))
    with pytest.raises(corpora.CorpusError, match="has SHA-256 .* pins 0000"):
        corpora.corpus_path("chitchat")
    monkeypatch.setitem(corpora.PINS, "chitchat", corpora.Pin("no-such-corpus-pkg", "1.0", "MIT",
                                                               pin.files, pin.sha256))
    with pytest.raises(corpora.CorpusError, match="no-such-corpus-pkg is not installed"):
        corpora.corpus_path("chitchat")
    with pytest.raises(corpora.CorpusError, match="has 740 records|records, not"):
        corpora.record("chatterbot", 10 ** 6, "en")


def test_precision_follows_the_measurement():
    """auto takes bf16 only when it measures >= 1.5x fp32 (AMX); elsewhere fp32, said in one
    line; an asked precision is kept; an unknown one is refused."""
    fast = {"amx": True, "bf16_gflops": 1086.0, "fp32_gflops": 149.0}
    slow = {"amx": False, "bf16_gflops": 40.0, "fp32_gflops": 150.0}
    dtype, why = precision.choose("auto", fast)
    assert dtype == "bfloat16" and "7.3x" in why and "AMX yes" in why
    dtype, why = precision.choose("auto", slow)
    assert dtype == "float32" and "does not pay" in why and "\n" not in why
    assert precision.choose("float32", fast)[0] == "float32"
    with pytest.raises(ValueError, match="choose auto, float32 or bfloat16"):
        precision.choose("fp8")
    with precision.autocast("bfloat16"):
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.bfloat16
    with precision.autocast("float32"):
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.float32


def test_vllm_batch_resumes_past_a_cut_line(tmp_path):
    """The answer file's ids are what a restart skips; a line cut by a stop is not counted."""
    f = tmp_path / "out.jsonl"
    f.write_text('{"id": 0, "answer_ids": [1]}\n{"id": 1, "answer_ids": [2]}\n{"id": 2, "ans')
    assert vllm_batch.done_ids(str(f)) == {0, 1}
    assert vllm_batch.done_ids(str(tmp_path / "none.jsonl")) == set()


def test_committed_files_round_trip(tmp_path, stream):
    """Requests are stored by source (corpus index or text) and answers as token ids; reading
    them back gives the same user turns and answers."""
    reqs = [dict(r, id=i) for i, r in enumerate(stream[:50])]
    answers = [{"id": i, "answer_ids": [i, i + 1, 2], "temperature": 0.8 if i % 6 == 5 else 0.0}
               for i in range(50)]
    assert write_committed(reqs, answers, tmp_path)
    assert not write_committed(reqs[:20], answers[:20], tmp_path)     # a shorter prefix keeps them
    back, by_id = read_committed(tmp_path)
    assert [r["messages"] for r in back] == [r["messages"] for r in reqs]
    assert [by_id[a["id"]] for a in answers] == answers
    raw = (tmp_path / "requests.jsonl.gz").read_bytes()
    assert b"chitchat" in __import__("gzip").decompress(raw)           # corpus rows by index


def test_committed_answers_restore_a_new_machines_work_file(tmp_path, stream):
    """A work file holding some answers (its last line cut by a stop) gets the committed answers
    it lacks, each once, the cut line left apart; a stream whose request differs is refused."""
    reqs = [dict(r, id=i) for i, r in enumerate(stream[:30])]
    answers = [{"id": i, "answer_ids": [i, 7], "temperature": 0.0} for i in range(30)]
    write_committed(reqs, answers, tmp_path / "c")
    out = tmp_path / "responses.jsonl"
    out.write_text(json.dumps(dict(answers[0], answer_source="vllm")) + '\n{"id": 1, "ans')
    assert restore_committed(out, reqs, chat_data._done(out), tmp_path / "c") == 29
    done = chat_data._done(out)
    assert sorted(done) == list(range(30)) and done[5]["answer_ids"] == [5, 7]
    assert restore_committed(out, reqs, done, tmp_path / "c") == 0            # nothing twice
    other = [dict(r, source=stream[40]["source"]) if r["id"] == 3 else r for r in reqs]
    with pytest.raises(ValueError, match="request 3 .*stream changed"):
        restore_committed(tmp_path / "fresh.jsonl", other, {}, tmp_path / "c")


def test_warm_start_moves_rows_to_the_same_target_ids():
    """The old drafter's lm_head row of target id x lands on the new draft id of x; ids the old
    vocabulary lacked keep the fresh rows."""
    V = 20
    old_t2d = torch.zeros(V, dtype=torch.bool)
    old_t2d[[1, 3, 5, 7]] = True
    new_t2d = torch.zeros(V, dtype=torch.bool)
    new_t2d[[0, 3, 7, 9, 11]] = True
    old_rows = torch.arange(4.0)[:, None].expand(4, 3) + 100          # row i = 100 + i
    fresh = torch.zeros(5, 3)
    out = warm_vocab_rows(old_rows, old_t2d, fresh, new_t2d)
    assert out[1].tolist() == [101.0] * 3                             # target id 3: old row 1
    assert out[2].tolist() == [103.0] * 3                             # target id 7: old row 3
    assert out[0].tolist() == out[3].tolist() == out[4].tolist() == [0.0] * 3
    scaled = warm_vocab_rows(old_rows, old_t2d, torch.ones(5, 3), new_t2d, new_row_scale=0.25)
    assert scaled[0].tolist() == scaled[4].tolist() == [0.25] * 3 and scaled[1].tolist() == [101.0] * 3


def test_fc_norm_warm_start_keeps_fc_for_a_typical_token():
    """fc folded with each captured layer's typical RMS: a drafter with fc_norm fuses a token whose
    chunks have those RMS exactly as the drafter without it did; a token with massive activations
    (one chunk 1,000x) no longer scales fc's output."""
    torch.manual_seed(0)
    old = Eagle3Drafter(tiny_drafter_config())
    new = Eagle3Drafter(tiny_drafter_config(fc_norm=True))
    n_aux, Ht = old.config.num_aux, old.config.target_hidden_size
    rms = torch.tensor([0.5, 3.0, 20.0])
    with torch.no_grad():
        new.fc.weight.copy_(fold_fc_norm(old.fc.weight, rms))
    chunks = torch.randn(1, 2, n_aux, Ht)
    chunks = chunks / chunks.pow(2).mean(-1, keepdim=True).sqrt() * rms.view(1, 1, n_aux, 1)
    x = chunks.reshape(1, 2, n_aux * Ht)
    torch.testing.assert_close(new.fuse(x), old.fuse(x), rtol=1e-4, atol=1e-4)
    loud = chunks.clone()
    loud[..., 2, :] *= 1000
    loud = loud.reshape(1, 2, n_aux * Ht)
    torch.testing.assert_close(new.fuse(loud), new.fuse(x), rtol=1e-3, atol=1e-3)
    assert old.fuse(loud).norm() > 100 * old.fuse(x).norm()
    seqs = [{"feats": x[0]}, {"feats": x[0] * 2}, {"feats": x[0] * 3}]
    torch.testing.assert_close(chunk_rms(seqs, n_aux, Ht), rms * 2)      # the median sequence's


def test_a_range_without_requests_is_refused():
    with pytest.raises(ValueError, match="--first 100 --answered 100"):
        drafter_scale.train_scaled(drafter_scale.ScaleConfig(first=100, answered=100))


def test_boolean_flags_parse_as_switches():
    """--fc-norm turns the field on, --no-fc-norm off; a value such as "0" is not read as True."""
    import argparse
    from eagle_nb.train.__main__ import add_dataclass_flags
    p = argparse.ArgumentParser()
    add_dataclass_flags(p, drafter_scale.ScaleConfig)
    assert p.parse_args([]).fc_norm is False
    assert p.parse_args(["--fc-norm"]).fc_norm is True
    assert p.parse_args(["--no-fc-norm"]).fc_norm is False
    assert p.parse_args(["--lr", "0.001"]).lr == 0.001
    with pytest.raises(SystemExit):
        p.parse_args(["--fc-norm", "0"])


def test_norm_before_fc_fold_keeps_fc_for_a_typical_token():
    """The one-norm variant (norm_before_fc, which llama.cpp also reads): fc folded with the whole
    feature's RMS fuses a token of that RMS as before."""
    torch.manual_seed(1)
    old = Eagle3Drafter(tiny_drafter_config())
    new = Eagle3Drafter(tiny_drafter_config(norm_before_fc=True))
    x = torch.randn(1, 3, old.config.fc_in_features)
    x = x / x.pow(2).mean(-1, keepdim=True).sqrt() * 7.0
    rms = chunk_rms([{"feats": x[0]}], 1, old.config.fc_in_features)
    torch.testing.assert_close(rms, torch.tensor([7.0]))
    with torch.no_grad():
        new.fc.weight.copy_(fold_fc_norm(old.fc.weight, rms))
    torch.testing.assert_close(new.fuse(x), old.fuse(x), rtol=1e-4, atol=1e-4)


def test_a_wider_mlp_starts_as_the_narrow_one():
    """The draft layer's MLP padded from 64 to 96 neurons computes what the 64-neuron one did."""
    from eagle_nb.train.warm_start import widen_mlp
    torch.manual_seed(2)
    old = Eagle3Drafter(tiny_drafter_config())
    wide = Eagle3Drafter(tiny_drafter_config(intermediate_size=96))
    wide.load_state_dict(widen_mlp(old.state_dict(), wide.state_dict()))
    x = torch.randn(2, 5, old.config.hidden_size)
    torch.testing.assert_close(wide.midlayer.mlp(x), old.midlayer.mlp(x), rtol=1e-5, atol=1e-5)
    assert wide.midlayer.mlp.gate_proj.weight[64:].abs().sum() > 0          # new neurons can learn
