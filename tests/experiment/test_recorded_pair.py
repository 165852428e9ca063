"""A pair whose target is a recording (experiment/recorded_pair.py) gives the loaded pair's greedy
chain numbers: the same accept counts for every prompt, depth 1..8 and every switchable fault a
recording can answer; what it cannot answer is refused with the reason."""
import json
import re

import pytest
import torch

from eagle_nb.experiment import faults as F
from helpers import code_pair, code_prompts
from eagle_nb.experiment.recorded_pair import RecordedPair
from eagle_nb.experiment.setting import Setting
from eagle_nb.recordings.recording import record
from eagle_nb.recordings.records import RecordingError
from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET

N_PROMPTS, NEW = 8, 24


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


@pytest.fixture(scope="module")
def prompts():
    return code_prompts(N_PROMPTS)


@pytest.fixture(scope="module")
def recordings(pair, prompts, tmp_path_factory):
    """Every layer + final state (what every drafter-side fault needs), and the drafter's three
    layers only (what `eagle-nb record` writes by default)."""
    root = tmp_path_factory.mktemp("rec")
    enc = [pair.encode(p) for p in prompts]
    eos = pair.tokenizer.eos_token_id
    every = record(pair.target, enc, root / "all", "all", max_new_tokens=NEW, lookahead=8,
                   final_hidden=True, eos_token_id=eos, texts=prompts, progress=False)
    three = record(pair.target, enc, root / "three", pair.layer_ids, max_new_tokens=NEW, lookahead=8,
                   eos_token_id=eos, progress=False)
    return every, three


@pytest.fixture(scope="module")
def recorded(recordings):
    return RecordedPair(recordings[0], CODE_DRAFTER, device="cpu")


def accepted(res):
    return [[s.accepted for s in st.steps] for st in res.stats]


def test_every_fault_and_depth_equals_the_loaded_pair(pair, recorded, prompts):
    """Accept counts equal per prompt and verify step; faults a recording cannot answer (a new
    target object, new prompt text) say so, and faults that cannot happen on this pair are
    refused by both alike."""
    compared, refused = 0, {}
    for faults in [()] + [(f.name,) for f in F.FAULTS]:
        for k in range(1, 9):
            s = Setting(faults=faults, depth=k, max_new_tokens=NEW)
            try:
                live = pair.run(prompts, s, progress=False)
            except F.NotApplicable as e:
                with pytest.raises(F.NotApplicable, match=re.escape(str(e))):
                    recorded.run(prompts, s, progress=False)
                break
            try:
                rec = recorded.run(prompts, s, progress=False)
            except F.NeedsTarget as e:
                refused[faults[0]] = str(e)
                break
            assert accepted(rec) == accepted(live), (faults, k)
            assert rec.metrics.accept_length == live.metrics.accept_length
            assert rec.outputs == live.outputs
            assert rec.computed_by == "one-pass" and "recording" in rec.wiring["target"]
            compared += 1
    assert set(refused) == {"wrapper-capture"}, refused
    assert "loaded target" in refused["wrapper-capture"]
    assert compared >= 15 * 8


def test_what_a_recording_cannot_answer_is_refused(recorded, prompts, recordings):
    with pytest.raises(F.NeedsTarget, match="greedy chains"):
        recorded.run(prompts, Setting(depth=4, temperature=1.0, max_new_tokens=NEW))
    with pytest.raises(F.NeedsTarget, match="topk 2"):
        recorded.run(prompts, Setting(depth=3, topk=2, num_draft_tokens=6, max_new_tokens=NEW))
    with pytest.raises(RecordingError, match=r"needs 33"):        # 24 + 8 recorded, 24 + 9 asked
        recorded.run(prompts, Setting(depth=9, max_new_tokens=NEW))
    with pytest.raises(RecordingError, match="was not recorded"):
        recorded.run(["def not_recorded(x):"], Setting(depth=4, max_new_tokens=8))
    three = RecordedPair(recordings[1], CODE_DRAFTER, device="cpu")
    assert three.run(prompts, Setting(depth=4, max_new_tokens=NEW)).metrics.accept_length == \
        recorded.run(prompts, Setting(depth=4, max_new_tokens=NEW)).metrics.accept_length
    with pytest.raises(ValueError, match=r"states of HF layer ids \[3, 5, 6\] were not kept "
                                         r"\(kept: \[2, 4, 5\]\); record with every layer kept"):
        three.run(prompts, Setting(faults=("layer-ids+1",), depth=4, max_new_tokens=NEW))
    with pytest.raises(ValueError, match="no final hidden state recorded"):
        three.run(prompts, Setting(faults=("fc-bypass",), depth=4, max_new_tokens=NEW))


def test_prompts_by_text_or_record_name(recorded, recordings, prompts):
    """The recording keeps its prompts' text; a record can also be named, and a recording written
    without texts lists record names."""
    assert recorded.prompts(3) == prompts[:3]
    by_name = recorded.run(["r000000", "r000001"], Setting(depth=4, max_new_tokens=NEW))
    by_text = recorded.run(prompts[:2], Setting(depth=4, max_new_tokens=NEW))
    assert accepted(by_name) == accepted(by_text)
    three = RecordedPair(recordings[1], CODE_DRAFTER, device="cpu")
    assert three.prompts(2) == ["r000000", "r000001"]
    index = json.loads((recordings[0] / "recording.json").read_text())
    assert [r["prompt"] for r in index["records"]] == prompts


def test_doctor_measures_from_a_recording(pair, recorded, prompts):
    """The doctor on a recorded pair measures the same profiles as on the loaded pair, names the
    faults it could not measure and why, and checks the fc range on the recorded states."""
    from eagle_nb.doctor.measure import fc_range_check
    from eagle_nb.doctor.measure import measure_faults as measure
    names = ["fc-bypass", "d2t-absolute", "layer-ids+1", "wrapper-capture"]
    live, _ = measure(pair, prompts, 4, NEW, faults=names, progress=False)
    rec, skipped = measure(recorded, prompts, 4, NEW, faults=names, progress=False)
    assert set(skipped) == {"wrapper-capture"} and "NeedsTarget" in skipped["wrapper-capture"]
    for name, p in rec.items():
        assert p.tau == live[name].tau, name
    check = fc_range_check(recorded, prompts[:2])
    assert check.status == "pass" and "max |fc input|" in check.evidence


def test_a_drafter_without_embedding_reads_the_target_rows_lazily(recordings, tmp_path):
    """Format A (no embed_tokens) on a recording takes the embedding from the target's directory;
    without a target directory it is refused naming what is missing (a copy: a shipped drafter
    names its own target)."""
    rp = RecordedPair(recordings[0], CODE_DRAFTER, CODE_TARGET, device="cpu")
    assert rp.tokenizer is not None and rp.hidden_size == rp.drafter.config.hidden_size
    torch.testing.assert_close(rp.drafter.embed_tokens.weight[:4],
                               code_pair(device="cpu").target.get_input_embeddings().weight[:4].float())
    import shutil
    copy = shutil.copytree(CODE_DRAFTER, tmp_path / "drafter")
    with pytest.raises(Exception, match="embed"):
        RecordedPair(recordings[0], copy, None, device="cpu")


def test_the_recording_says_its_dtype_and_another_dtype_warns(recordings, tmp_path):
    """`record` writes the dtype the target ran in; a recording made in another dtype than the
    kit's reference loop runs the target in warns when it stands in for the target
    (DtypeMismatchWarning) and every result computed from it says so; the same dtype is silent."""
    import shutil
    import warnings

    from eagle_nb.recordings.recording import DtypeMismatchWarning, Recording
    assert Recording(recordings[1]).target_dtype == "float32"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DtypeMismatchWarning)
        RecordedPair(recordings[1], CODE_DRAFTER, device="cpu")
    other = tmp_path / "bf16"
    shutil.copytree(recordings[1], other)
    index = json.loads((other / "recording.json").read_text())
    index["target_dtype"] = "bfloat16"          # as `record --engine vllm --dtype auto` on a CPU
    (other / "recording.json").write_text(json.dumps(index))
    with pytest.warns(DtypeMismatchWarning, match="target in bfloat16, compared with the kit's reference loop"):
        rp = RecordedPair(other, CODE_DRAFTER, device="cpu")
    res = rp.run(["r000000"], Setting(depth=4, max_new_tokens=NEW))
    assert any("recorded with the target in bfloat16" in n for n in res.notes)


def test_a_chat_is_kept_as_its_turns(tmp_path):
    """`record --prompts` on chat requests (the real pair's prompt file): the index keeps each
    request's turns as JSON, and the recording lists them back as `Chat`s."""
    from eagle_nb.io.prompts import Chat
    from eagle_nb.recordings.recording_writer import RecordingWriter
    chats = [Chat.user("Why is the sky blue?"), Chat.user("Bonjour !", system="Be brief.")]
    w = RecordingWriter(tmp_path / "rec", [2, 4, 5], num_layers=8, max_new_tokens=2,
                        lookahead=1, eos_token_id=None)
    for i, c in enumerate(chats):
        ids = torch.arange(5) + i
        w.add(ids, 2, torch.zeros(4, 3 * 8), prompt=c)
    w.close()
    index = json.loads((tmp_path / "rec" / "recording.json").read_text())
    assert index["records"][1]["messages"] == chats[1].as_dicts()
    rp = RecordedPair(tmp_path / "rec", device="cpu")
    assert rp.prompts() == chats
