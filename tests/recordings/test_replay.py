"""Recordings and computing from them: τ from recorded target features (through the one door,
`RecordedPair`) equals the live loop's exactly, as does the step-by-step reference
(`recordings.replay.replay_reference`); public tools' teacher-forced files are read safely and labelled
as estimates."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from eagle_nb.model.capture import capture
from eagle_nb.model.layers import eagle3_layers
from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.cli.main import main as cli_main
from eagle_nb.recordings.recording import Recording, record, record_one
from eagle_nb.recordings.records import RecordingError
from eagle_nb.experiment.recorded_pair import RecordedPair
from eagle_nb.experiment.setting import Setting
from eagle_nb.loop.metrics import from_stats
from eagle_nb.recordings.replay import replay_reference
from helpers import code_prompts, plant
from eagle_nb.loop.chain import generate, greedy_reference
from eagle_nb.model.targets import load_target
from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET
from helpers import peak_rss_mb

LAYERS = list(eagle3_layers(8))        # the shipped format-A drafter reads the EAGLE defaults


def replay(path, depth, max_new_tokens=None, drafter=CODE_DRAFTER, check_greedy=False, dtype=None):
    """The recording computed through the one door (all its records, in order)."""
    rp = RecordedPair(path, drafter, CODE_TARGET, device="cpu", check_greedy=check_greedy, dtype=dtype)
    n = max_new_tokens or rp.recording.meta["max_new_tokens"]
    return rp.run(rp.prompts(), Setting(depth=depth, max_new_tokens=n), progress=False)


@pytest.fixture(scope="module")
def pair():
    model, tok = load_target(CODE_TARGET, device="cpu")
    return model, tok, load_drafter(CODE_DRAFTER, model)


@pytest.fixture(scope="module")
def shipped_recording(pair, tmp_path_factory):
    """4 shipped prompts x (40 + 8) tokens, small shards so the recording has several."""
    model, tok, _ = pair
    ids = [tok(p, return_tensors="pt")["input_ids"] for p in code_prompts(4)]
    out = record(model, ids, tmp_path_factory.mktemp("rec") / "r", LAYERS, max_new_tokens=40,
                 lookahead=8, target_name="shipped", eos_token_id=tok.eos_token_id,
                 final_hidden=True, shard_bytes=100_000, progress=False)
    return out, ids


def test_replay_equals_live_loop_at_every_depth(pair, shipped_recording):
    """Shipped pair, 4 prompts x 40 tokens: at every depth 1..8 the accept counts and tokens
    computed from the recording (the one pass, and the step-by-step reference) equal the live
    loop's, prompt by prompt."""
    model, tok, drafter = pair
    path, ids = shipped_recording
    for k in range(1, 9):
        res = replay(path, depth=k, dtype=drafter.fc.weight.dtype)
        ref = replay_reference(drafter, Recording(path), k, 40)
        assert not res.estimate
        for x, st, rs in zip(ids, res.stats, ref):
            _, live = generate(model, drafter, x, depth=k, max_new_tokens=40, layer_ids=LAYERS,
                               eos_token_id=tok.eos_token_id)
            assert st.accept_counts == live.accept_counts == rs.accept_counts, f"depth {k}"
            assert st.tokens == live.tokens == rs.tokens, f"depth {k}"


def test_recording_holds_greedy_output_and_captured_states(pair, shipped_recording):
    """Each record: ids = prompt + greedy_reference continuation (48 tokens, EOS not cut), aux =
    the captured states of a plain forward over the same tokens (to fp32 rounding), final = the
    post-norm last hidden state; index and several shards on disk."""
    model, _, _ = pair
    path, ids = shipped_recording
    index = json.loads((path / "recording.json").read_text())
    assert index["layer_ids_hf"] == LAYERS and index["target"] == "shipped" and len(index["shards"]) > 1
    for x, r in zip(ids, Recording(path)):
        ref, _ = greedy_reference(model, x, 48)
        assert r.input_ids.tolist() == x[0].tolist() + ref
        assert r.prompt_len == x.shape[1] and r.aux.shape == (x.shape[1] + 47, 3 * 192)
        with torch.no_grad(), capture(model, LAYERS) as st:
            hs = model(input_ids=r.input_ids[None, :-1], output_hidden_states=True).hidden_states
        torch.testing.assert_close(r.aux, st.fused()[0], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(r.final, hs[-1][0], atol=1e-4, rtol=1e-4)


def test_record_with_device_map_equals_plain(pair, tmp_path):
    """A target loaded with device_map records the same ids and states as a plain load."""
    model, tok, _ = pair
    sharded, _ = load_target(CODE_TARGET, device_map={"": "cpu"})
    x = tok(code_prompts(1)[0], return_tensors="pt")["input_ids"]
    a = record_one(model, x, LAYERS, 6)
    b = record_one(sharded, x, LAYERS, 6)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_replay_refuses_what_the_recording_cannot_answer(pair, shipped_recording, tmp_path):
    """Depth beyond the lookahead, other layer ids, a budget beyond the recording, a missing
    shard: each a RecordingError naming the fault."""
    path, _ = shipped_recording
    with pytest.raises(RecordingError, match="lookahead 8"):
        replay(path, depth=9)
    with pytest.raises(RecordingError, match="max_new_tokens=60"):
        replay(path, depth=4, max_new_tokens=60)
    other = plant(tmp_path, src=CODE_DRAFTER, config=lambda c: c.update(eagle_aux_hidden_state_layer_ids=[1, 4, 5]))
    with pytest.raises(RecordingError, match=r"recorded HF layer ids \[2, 4, 5\].*\[1, 4, 5\]"):
        replay(path, depth=2, drafter=other)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "recording.json").write_text((path / "recording.json").read_text())
    with pytest.raises(RecordingError, match="shard-00000"):
        Recording(broken)


def _as_specforge(rec_path, out, pickled_object=False):
    """Our recording rewritten as SpecForge offline samples (teacher-forced on the recorded text)."""
    out.mkdir()
    for r in Recording(rec_path):
        T = r.aux.shape[0]
        d = {"input_ids": r.input_ids[:T], "loss_mask": (torch.arange(T) >= r.prompt_len).long(),
             "aux_hidden_state": r.aux[None].bfloat16().float(), "hidden_state": r.final[None]}
        if pickled_object:
            d["meta"] = object()
        torch.save(d, out / f"{r.name}.ckpt")
    return out


def test_specforge_files_replay_as_labelled_estimates(pair, shipped_recording, tmp_path):
    """SpecForge .ckpt samples made from the recording replay to the same accept counts (bf16
    features: up to rare near-ties) and are labelled an estimate; a file holding a pickled object is
    refused, never unpickled."""
    path, _ = shipped_recording
    sf = _as_specforge(path, tmp_path / "sf")
    ours = replay(path, depth=3, max_new_tokens=30)
    theirs = replay(sf, depth=3, max_new_tokens=30)
    assert theirs.estimate and "ESTIMATE" in theirs.report_text()
    same = sum(a.accept_counts == b.accept_counts for a, b in zip(ours.stats, theirs.stats))
    assert same >= 3, (ours.metrics.accept_length, theirs.metrics.accept_length)
    assert abs(ours.metrics.accept_length - theirs.metrics.accept_length) < 0.1
    # with the target's lm_head (read lazily) the text is checked against the target's greedy
    # choice: the recorded greedy text agrees everywhere, so tau is exact; one changed token is not
    checked = replay(sf, depth=3, max_new_tokens=30, check_greedy=True)
    assert not checked.estimate and any("100.0%" in n for n in checked.notes), checked.notes
    first = sorted(sf.glob("*.ckpt"))[0]
    d = torch.load(first, weights_only=True)
    d["input_ids"][-5] = (d["input_ids"][-5] + 1) % 4096
    torch.save(d, first)
    assert replay(sf, depth=3, max_new_tokens=30, check_greedy=True).estimate
    bad = _as_specforge(path, tmp_path / "bad", pickled_object=True)
    with pytest.raises(RecordingError, match="weights_only=True"):
        replay(bad, depth=3)


def test_speculators_files_are_read(pair, shipped_recording, tmp_path):
    """speculators samples, old (.pt, list of layers + last layer) and new (hs_*.safetensors),
    replay to exactly the accept counts of our recording at fp32."""
    path, _ = shipped_recording
    (tmp_path / "pt").mkdir()
    (tmp_path / "st").mkdir()
    for i, r in enumerate(Recording(path)):
        T = r.aux.shape[0]
        layers = list(r.aux.split(192, -1)) + [r.final]
        mask = (torch.arange(T) >= r.prompt_len).long()
        torch.save({"input_ids": r.input_ids[:T], "hidden_states": layers, "loss_mask": mask},
                   tmp_path / "pt" / f"data_{i}.pt")
        save_file({"token_ids": r.input_ids[:T], "hidden_states": torch.stack(layers, 1).contiguous(),
                   "loss_mask": mask}, str(tmp_path / "st" / f"hs_{i}.safetensors"))
    ours = replay(path, depth=4, max_new_tokens=30)
    for d in ("pt", "st"):
        theirs = replay(tmp_path / d, depth=4, max_new_tokens=30)
        assert theirs.estimate
        assert [s.accept_counts for s in theirs.stats] == [s.accept_counts for s in ours.stats]


def test_a_record_ending_at_its_budget_counts_the_steps_an_engine_counts(pair, shipped_recording, tmp_path):
    """speculators files cut to prompt + 30 tokens (no lookahead, as an engine's max_tokens
    leaves them) replayed at 30 new tokens: the same verify steps as the exact recording (an
    engine's count; not 30 - depth tokens' worth), every step's count at most the exact one,
    differing only on the steps reported as censored, and the note says how many."""
    path, _ = shipped_recording
    N, k = 30, 4
    (tmp_path / "cut").mkdir()
    for i, r in enumerate(Recording(path)):
        T = r.prompt_len + N
        layers = list(r.aux[:T].split(192, -1)) + [r.final[:T]]
        mask = (torch.arange(T) >= r.prompt_len).long()
        save_file({"token_ids": r.input_ids[:T].contiguous(), "hidden_states": torch.stack(layers, 1).contiguous(),
                   "loss_mask": mask}, str(tmp_path / "cut" / f"hs_{i}.safetensors"))
    exact = replay(path, depth=k, max_new_tokens=N)
    cut = replay(tmp_path / "cut", depth=k, max_new_tokens=N)
    assert [len(s.accept_counts) for s in cut.stats] == [len(s.accept_counts) for s in exact.stats]
    assert [s.tokens for s in cut.stats] == [s.tokens for s in exact.stats]
    differ = 0
    for a, b in zip(cut.stats, exact.stats):
        assert all(x <= y for x, y in zip(a.accept_counts, b.accept_counts))
        differ += sum(x != y for x, y in zip(a.accept_counts, b.accept_counts))
    note = [n for n in cut.notes if "censored" in n or "drafted past the recorded" in n]
    n_cens = int(note[0].split()[0]) if note else 0
    assert differ <= n_cens <= len(cut.stats), (differ, n_cens, cut.notes)


def test_cli_record_and_speculate_features(tmp_path, capsys):
    """`eagle-nb record` then `eagle-nb speculate --features`: the printed tau equals the API's."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in code_prompts(2)))
    with pytest.raises(SystemExit) as e:
        cli_main(["record", "--target", str(CODE_TARGET), "--prompts", str(prompts), "--out", str(tmp_path / "rec"),
                  "--max-new-tokens", "16", "--lookahead", "4"])
    assert e.value.code == 0
    assert "recorded 2 prompts" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli_main(["speculate", "--drafter", str(CODE_DRAFTER), "--features", str(tmp_path / "rec"), "--depth", "3",
                  "--max-new-tokens", "16", "--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    drafter = load_drafter(CODE_DRAFTER, CODE_TARGET, dtype=torch.float32)
    ref = from_stats(replay_reference(drafter, Recording(tmp_path / "rec"), 3, 16))
    assert out["accept_length"] == ref.accept_length and out["tau_is_estimate"] is False
    # a fault the recording answers is measured on it; one it cannot is refused with the reason
    with pytest.raises(SystemExit) as e:
        cli_main(["speculate", "--drafter", str(CODE_DRAFTER), "--features", str(tmp_path / "rec"), "--ablate", "d2t-absolute",
                  "--depth", "3", "--max-new-tokens", "16", "--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    from eagle_nb.experiment.recorded_pair import RecordedPair
    from eagle_nb.experiment.setting import Setting
    rp = RecordedPair(tmp_path / "rec", CODE_DRAFTER)
    api = rp.run(rp.prompts(), Setting(faults=("d2t-absolute",), depth=3, max_new_tokens=16))
    assert out["accept_length"] == api.metrics.accept_length < 1.5 and out["computed_by"] == "one-pass"
    with pytest.raises(SystemExit) as e:
        cli_main(["speculate", "--drafter", str(CODE_DRAFTER), "--features", str(tmp_path / "rec"), "--ablate", "fc-bypass"])
    assert e.value.code == 2 and "the final state was not recorded" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli_main(["speculate", "--drafter", str(CODE_DRAFTER), "--features", str(tmp_path / "rec"), "--temperature", "1"])
    assert e.value.code == 2 and "greedy speculation only" in capsys.readouterr().err


@pytest.mark.slow
def test_replay_equals_live_loop_all_code_prompts(pair, tmp_path):
    """All 16 shipped evaluation prompts x 64 tokens (the README's setting), depths 1..8: replayed
    accept counts and tokens equal the live loop's."""
    model, tok, drafter = pair
    ids = [tok(p, return_tensors="pt")["input_ids"] for p in code_prompts()]
    path = record(model, ids, tmp_path / "r", LAYERS, max_new_tokens=64, lookahead=8,
                  eos_token_id=tok.eos_token_id, progress=False)
    for k in range(1, 9):
        res = replay(path, depth=k, dtype=drafter.fc.weight.dtype)
        for x, st in zip(ids, res.stats):
            _, live = generate(model, drafter, x, depth=k, max_new_tokens=64, layer_ids=LAYERS,
                               eos_token_id=tok.eos_token_id)
            assert (st.accept_counts, st.tokens) == (live.accept_counts, live.tokens), f"depth {k}"


def _synthetic_recording(path, n_records, T=3500, per_shard=3):
    """A recording in our format with `n_records` records of T positions (8 MiB of fp32 aux each),
    `per_shard` records per shard; tokens and states random (only memory is measured)."""
    path.mkdir()
    g = torch.Generator().manual_seed(0)
    index = {"format": "eagle_nb.recording", "version": 1, "target": "synthetic", "num_layers": 8,
             "layer_ids_hf": LAYERS, "max_new_tokens": 4, "lookahead": 2, "eos_token_id": None,
             "teacher_forced": False, "shards": [], "records": []}
    for s in range(0, n_records, per_shard):
        shard, name = {}, f"shard-{s:05d}.safetensors"
        for i in range(s, min(s + per_shard, n_records)):
            shard[f"r{i}.input_ids"] = torch.randint(3, 4096, (T,), generator=g)
            shard[f"r{i}.aux"] = torch.randn(T - 1, 576, generator=g)
            index["records"].append({"name": f"r{i}", "shard": name, "prompt_len": 8, "length": T})   # only 14 positions replayed; all T loaded
        save_file(shard, str(path / name))
        index["shards"].append(name)
    (path / "recording.json").write_text(json.dumps(index))
    return path


def test_replay_memory_does_not_grow_with_the_recording(tmp_path):
    """Peak RSS of `eagle-nb speculate --features` on a 24-record (192 MiB) recording is within
    48 MiB of that on a 2-record one: records are read one at a time."""
    small = _synthetic_recording(tmp_path / "small", 2)
    big = _synthetic_recording(tmp_path / "big", 24)
    size = sum(f.stat().st_size for f in big.iterdir()) / 2**20
    rss = {n: peak_rss_mb("speculate", "--drafter", str(CODE_DRAFTER), "--features", str(p), "--depth", "2",
                          "--max-new-tokens", "4")
           for n, p in (("small", small), ("big", big))}
    print(f"replay peak RSS {rss['small']:.0f} MiB (2 records), {rss['big']:.0f} MiB ({size:.0f} MiB recording)")
    assert size > 180 and rss["big"] - rss["small"] < 48, rss
