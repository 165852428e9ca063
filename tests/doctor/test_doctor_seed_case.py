"""The kit's own story at test time: a real-shaped SpecForge Kimi-K2.5 drafter (published config
text and key names, widths / 64), a target that cannot run here (published config, embedding and
head only) and SGLang's `accept len: 1.05, accept rate: 0.21`; plus a SafeAILab Llama-3.1-8B drafter
(`pytorch_model.bin`) observed as tau 1.3 at depth 3. The doctor decides up front that the target
cannot run, never loads it, and names the serving-path faults from the catalogue's signatures."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from eagle_nb.checkpoints.real_shaped import published
from eagle_nb.checkpoints.seed_case import build_seed_case
from eagle_nb.doctor import preflight as P
from eagle_nb.doctor.run import doctor
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET
from eagle_nb.model.architectures import ARCHITECTURES, layers_on_meta, lookup, remote_code_reason

SERVING = {"wrapper-capture", "fc-bypass", "d2t-absolute", "embed-not-shared", "d2t-identity"}


@pytest.fixture
def no_target_load(monkeypatch):
    """Any attempt to build the target (or its tokenizer) fails the test."""
    def refuse(*a, **k):
        raise AssertionError("the doctor tried to load the target")
    monkeypatch.setattr("eagle_nb.model.targets.load_target", refuse)
    monkeypatch.setattr("eagle_nb.experiment.pair.load_target", refuse)


@pytest.mark.parametrize("case", ["kimi-k2.5", "kimi-k2"])
def test_seed_case_names_the_serving_path_without_loading_the_target(tmp_path, case, no_target_load):
    """Both target layouts: no check fails, the depth (k = 4) comes from the log, the target is
    never loaded, and the verdict (basis 'signature') leads with the serving-path faults, each with
    a serving-side check; the wrapper target warns 'wrapper-capture' and names it first, the text
    Kimi-K2 target (`DeepseekV3ForCausalLM`, layers at `model.layers`) does not warn."""
    c = build_seed_case(case, tmp_path)
    d = doctor(c.drafter, c.target, observed_log=c.log, progress=False)
    assert "fail" not in {x.status for x in d.checks}, d.text()
    assert d.observation["depth"] == 4 and d.inputs["depth"] == 4 and "5 draft tokens" in d.observation["depth_note"]
    assert d.verdict.basis == "signature" and "serving path" in d.verdict.summary
    top = [h.fault for h in d.hypotheses[:3]]    # on the real pair's catalogue output-norm-residual
    assert set(top) <= SERVING and {"d2t-absolute", "embed-not-shared"} <= set(top), d.text()  # is 4th
    assert all(h.serving_check for h in d.hypotheses[:3])
    ruled = {h.fault for h in d.hypotheses if h.ruled_out_by}
    assert {"lm-head-missing", "d2t-side-file", "embed-random", "layers0-keys-dropped"} <= ruled
    lay = d.check("target-layout")
    aux = d.hypotheses[0] if case == "kimi-k2.5" else next(h for h in d.hypotheses if h.fault == "fc-bypass")
    assert "print `forward_batch.spec_info.hidden_states.shape[-1]`" in aux.serving_check
    assert "384 when the aux states arrive, 128 when fc is skipped" in aux.serving_check   # 7168 / 64 -> 128 (step 64)
    if case == "kimi-k2.5":
        assert lay.status == "warn" and lay.faults == ["wrapper-capture"]
        assert d.verdict.cause == "wrapper-capture" == top[0] and d.verdict.confidence == "medium"
        assert "0.5.10 (PR #19689)" in d.verdict.fix and "set_eagle3_layers_to_capture" in d.verdict.fix
    else:
        assert lay.status == "pass" and "'model.layers' (known text decoder)" in lay.evidence
        assert "wrapper-capture" in ruled and "fc-bypass" in top
    assert not [h for h in d.hypotheses if h.fault.startswith("layer-ids") and h.kind == "crash-only"]
    assert any("dynamic: skipped (the target cannot run here" in n for n in d.notes)


def test_llama_safeailab_bin_drafter_is_judged_from_files_and_numbers(tmp_path, no_target_load):
    """SafeAILab format (`pytorch_model.bin`), published Llama-3.1-8B-Instruct config, embedding and
    head on disk, tau 1.3 at depth 3: preflight says why the target cannot run (no decoder weights,
    no tokenizer) and the verdict ranks by signature at k = 3 without building the target."""
    c = build_seed_case("llama-3.1-8b", tmp_path)
    pre = P.preflight(c.target)
    assert not pre.can_run and any("decoder weights are not here" in r for r in pre.reasons)
    assert any("no tokenizer files" in r for r in pre.reasons) and not any("own code" in r for r in pre.reasons)
    d = doctor(c.drafter, c.target, observed_tau=c.observed_tau, depth=c.depth, progress=False)
    assert d.verdict.basis == "signature" and d.inputs["depth"] == 3
    assert d.check("format").status == "warn" and d.check("target-layout").status == "pass"
    assert {h.kind for h in d.hypotheses} <= {"signature", "not measured"} | {
        f"serving path (signature of {n})" for n in ("fc-bypass", "d2t-absolute", "embed-random", "d2t-identity")}


def test_static_only_with_a_log_still_ranks(tmp_path):
    """`--static-only` with a log: the observation is used (basis 'signature', not 'none'), and a
    fault with static evidence that was not measured is labelled by what it is, never 'crash only'."""
    c = build_seed_case("kimi-k2.5", tmp_path)
    d = doctor(c.drafter, c.target, observed_log=c.log, dynamic=False, progress=False)
    assert d.verdict.basis == "signature" and d.verdict.cause == "wrapper-capture"
    assert "no observation" not in d.verdict.summary
    assert d.text().count("crash only") == 0


def test_preflight_shipped_target_can_run_and_real_configs_cannot():
    """The shipped target runs here (the doctor's measured path is unchanged); Kimi-K2's config
    needs its own code (auto_map, model_type kimi_k2) and ~1.03T parameters."""
    pre = P.preflight(CODE_TARGET)
    assert pre.can_run and not pre.reasons
    kimi = published("kimi_k2_instruct.json")
    assert remote_code_reason(kimi) and "auto_map" in remote_code_reason(kimi)
    assert remote_code_reason(published("llama31_8b_instruct.json")) is None
    # published parameter counts: Kimi-K2-Instruct 1,026,470,731,056; Llama-3.1-8B 8.03B
    assert P.estimate_params(kimi) == pytest.approx(1_026_470_731_056, rel=0.01)
    assert P.estimate_params(published("llama31_8b_instruct.json")) == pytest.approx(8.03e9, rel=0.01)


def test_architecture_table_tells_text_decoders_from_wrappers():
    """The table places DeepSeek-V3 / Kimi-K2's layers at `model.layers` (text) and Kimi-K2.5's at
    `language_model.model.layers` (wrapper, with the SGLang release that passes its aux states);
    a class transformers ships but the table lacks is found on the meta device."""
    assert lookup(published("kimi_k2_instruct.json")).layers == "model.layers"
    k25 = lookup(published("kimi_k25.json"))
    assert k25.wrapper and k25.layers == "language_model.model.layers"
    assert any("0.5.10 (PR #19689)" in e for e in k25.engines)
    assert any("PR #13904" in e for e in ARCHITECTURES["Qwen2_5_VLForConditionalGeneration"].engines)
    cfg = json.loads((CODE_TARGET / "config.json").read_text())
    assert layers_on_meta(dict(cfg, architectures=["Qwen2ForCausalLM"], model_type="qwen2"))[0] == "model.layers"


def test_a_recording_is_measured_when_the_target_cannot_run(tmp_path):
    """A target that cannot run here (no tokenizer files) plus a greedy recording of it (the
    drafter's three layers): the doctor measures the pair and every fault a recording can answer by
    the one pass over the recorded states, names the faults it could not measure and why, and the
    healthy tau it measures is the recording's replayed tau."""
    from helpers import code_prompts
    from eagle_nb.loop.metrics import from_stats
    from eagle_nb.recordings.recording import Recording, record
    from eagle_nb.recordings.replay import replay_reference
    from eagle_nb.checkpoints.load import load_drafter
    from eagle_nb.model.targets import load_target
    model, tok = load_target(CODE_TARGET, device="cpu")
    ids = [tok(p, return_tensors="pt")["input_ids"] for p in code_prompts(4)]
    rec = record(model, ids, tmp_path / "rec", [2, 4, 5], max_new_tokens=16, lookahead=4,
                 target_name="shipped", eos_token_id=tok.eos_token_id, progress=False)
    t = tmp_path / "t"
    shutil.copytree(CODE_TARGET, t, ignore=shutil.ignore_patterns("tokenizer*"))
    d = doctor(CODE_DRAFTER_SPECULATORS, t, observed_tau=1.05, depth=4, features=rec,
               max_new_tokens=16, progress=False)
    assert any(n.startswith("plan: 2. dynamic: one pass over the recording") for n in d.notes), d.notes
    assert any("one pass (exact greedy chain acceptance) on the recording" in n for n in d.notes)
    skipped = {n.split()[1]: n for n in d.notes if n.startswith("fault ") and "not measured" in n}
    assert {"wrapper-capture", "fc-bypass", "layer-ids+1"} <= set(skipped)
    assert "were not kept" in skipped["layer-ids+1"] and "NeedsTarget" in skipped["wrapper-capture"]
    measured = {h.fault: h.predicted["tau"] for h in d.hypotheses if h.predicted}
    assert {"healthy", "d2t-absolute", "lm-head-missing"} <= set(measured)
    replayed = from_stats(replay_reference(load_drafter(CODE_DRAFTER_SPECULATORS, dtype=torch.float32),
                                           Recording(rec), 4, 16))
    assert measured["healthy"] == pytest.approx(replayed.accept_length, abs=1e-9)
    assert d.verdict.cause not in ("healthy", "undetermined") and d.inputs["prompts"] == 4


def test_cli_on_the_seed_case(tmp_path):
    """The issue's command on the wrapper case: the plan comes first (stderr), the verdict names
    wrapper-capture, exit status 1."""
    c = build_seed_case("kimi-k2.5", tmp_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "eagle_nb", "doctor", "--drafter", str(c.drafter),
                        "--target", str(c.target), "--observed", str(c.log)],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("plan: 1. static checks") and "cannot run here" in p.stderr
    assert p.stdout.startswith("VERDICT: no check of the files fails") and "cause: wrapper-capture" in p.stdout
