"""The doctor's dynamic part on the shipped pair: predicted profiles for every catalogue fault,
ranking of observations produced by the kit's own loop under each fault, probes, the healthy
verdict, and the done-when command. The fault measurements run once per module (4 prompts x 16
tokens, greedy, k = 4) and are reused through the pair's run cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from eagle_nb.experiment import faults as F
from eagle_nb.doctor.catalogue import markdown, measure as measure_catalogue
from eagle_nb.doctor.measure import measure_faults as measure
from eagle_nb.doctor.ranking import TIE_Z
from eagle_nb.doctor.run import doctor
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.experiment.pair import Pair
from helpers import code_prompts
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET
from helpers import plant

K, N, NEW = 4, 4, 16
KW = dict(depth=K, n_prompts=N, max_new_tokens=NEW, progress=False)


@pytest.fixture(scope="module")
def pair():
    return Pair(CODE_TARGET, CODE_DRAFTER_SPECULATORS,
                speculators_path=str(CODE_DRAFTER_SPECULATORS))


@pytest.fixture(scope="module")
def measured(pair):
    return measure(pair, code_prompts(N), K, NEW, progress=False)


def test_healthy_shipped_pair_no_fail_healthy_verdict(pair, measured):
    """No observation: every check passes or warns (none fails), the verdict is healthy, no probe
    finds a clearly better wiring, and every applicable fault has a predicted profile."""
    d = doctor(CODE_DRAFTER_SPECULATORS, pair=pair, **KW)
    assert "fail" not in {c.status for c in d.checks}, d.text()
    assert d.healthy and not any(p.better for p in d.probes)
    profiles, skipped = measured
    assert {h.fault for h in d.hypotheses if h.predicted} == set(profiles)
    assert set(profiles) | set(skipped) == {HEALTHY, *[f.name for f in F.FAULTS]}
    assert len(profiles) - 1 >= 15                  # switchable faults on the shipped pair
    assert profiles[HEALTHY].tau > 2 and profiles["d2t-absolute"].tau < 1.1


def _observed(profile):
    return dict(observed_tau=profile.tau, observed_per_position=list(profile.per_position))


@pytest.mark.parametrize("fault", [f.name for f in F.FAULTS])
def test_observed_profile_under_a_fault_ranks_that_fault_first(pair, measured, fault):
    """The kit's own loop under the fault produces the observation (tau + per-position); the
    doctor's top hypothesis is that fault, or it ties exactly with faults whose predictions are
    identical on this pair (then it is listed as also consistent). A mild fault whose numbers
    the healthy pair fits within the tie margin is named as also consistent with a healthy
    verdict (verdict.py: no fault is blamed on numbers that do not set it apart)."""
    profiles, _ = measured
    if fault not in profiles:
        pytest.skip(f"{fault} does not apply to the shipped pair")
    d = doctor(CODE_DRAFTER_SPECULATORS, pair=pair, **KW, **_observed(profiles[fault]))
    same = {n for n, p in profiles.items() if (p.tau, p.per_position) == (profiles[fault].tau,
                                                                         profiles[fault].per_position)}
    named = {d.verdict.cause, *d.verdict.also_consistent}
    hyp = next(h for h in d.hypotheses if h.fault == fault)
    if hyp.ruled_out_by:      # a file property the shipped files do not have: named, then excluded
        assert hyp.distance == min(h.distance for h in d.hypotheses if h.distance is not None)
        assert fault not in named and d.check(hyp.ruled_out_by).status == "pass"
        return
    assert fault in named, d.text()
    if d.verdict.cause == HEALTHY:      # the numbers do not set the fault apart from the pair as
        h = next(h for h in d.hypotheses if h.fault == HEALTHY)     # written: named, not blamed
        assert h.distance - hyp.distance <= TIE_Z and "do not tell it from" in d.verdict.summary
        return
    assert d.verdict.cause in same
    if same == {fault}:
        assert d.verdict.cause == fault and d.verdict.basis == "observation"


def test_healthy_observation_is_consistent_with_a_healthy_pair(pair, measured, tmp_path):
    """A vLLM log line carrying the healthy pair's numbers: 'consistent with a healthy pair'."""
    h = measured[0][HEALTHY]
    per = ", ".join(f"{x:.3f}" for x in h.per_position)
    log = tmp_path / "vllm.log"
    log.write_text(f"INFO SpecDecoding metrics: Mean acceptance length: {h.tau:.2f}, Accepted: 1 "
                   f"tokens, Drafted: 4 tokens, Per-position acceptance rate: {per}, Avg Draft "
                   f"acceptance rate: 50.0%\n")
    d = doctor(CODE_DRAFTER_SPECULATORS, pair=pair, observed_log=log, **KW)
    assert d.verdict.cause == HEALTHY and "consistent with a healthy pair" in d.verdict.summary


def test_done_when_observed_tau_1_05_gives_an_actionable_verdict(pair):
    """tau 1.05 at k = 4: the verdict names a near-zero-acceptance fault with a fix, lists the
    other faults that explain it as well, and the healthy pair is far down the ranking."""
    d = doctor(CODE_DRAFTER_SPECULATORS, pair=pair, observed_tau=1.05, **KW)
    assert d.verdict.cause != HEALTHY and d.verdict.fix and d.verdict.basis == "observation"
    top = {d.verdict.cause, *d.verdict.also_consistent}
    assert top <= {"d2t-absolute", "d2t-identity", "layers0-keys-dropped"}, d.text()
    ruled = {h.fault for h in d.hypotheses if h.ruled_out_by}   # the shipped files have them right
    assert {"embed-random", "lm-head-missing", "d2t-side-file"} <= ruled
    ranked = [h.fault for h in d.hypotheses if h.distance is not None]
    assert ranked.index(HEALTHY) > len(top)
    j = json.loads(d.to_json())
    assert j["verdict"]["cause"] == d.verdict.cause and j["hypotheses"][0]["weight"] > 0


def test_embedding_probe_finds_a_random_drafter_embedding(tmp_path):
    """A speculators drafter whose embed_tokens is random: the static check warns 'embed-random',
    and the probe that swaps in the target's embedding clearly raises tau; the verdict says so."""
    def rand_emb(st):
        g = torch.Generator().manual_seed(1)
        e = st["embed_tokens.weight"]
        st["embed_tokens.weight"] = (torch.randn(e.shape, generator=g) * e.float().std()).to(e.dtype)
        return st
    out = plant(tmp_path, weights=rand_emb)
    d = doctor(out, CODE_TARGET, faults=["embed-target-forced", "embed-random"], **KW)
    assert d.check("embed-tokens").status == "warn" and "embed-random" in d.check("embed-tokens").faults
    probe = next(p for p in d.probes if p.name == "embed-target-forced")
    assert probe.better and probe.tau > probe.baseline_tau + 0.5, d.text()
    assert d.verdict.cause == "embed-random" and d.verdict.basis == "probe"
    assert "the target's embedding fits better" in d.verdict.summary


def test_layer_ids_shifted_by_one_are_named_without_an_observation(tmp_path):
    """A drafter whose config writes its aux ids one boundary late ([3, 5, 6] for [2, 4, 5]),
    no observation: at the default workload (every shipped prompt x 64 tokens, by the one pass)
    the probe reading one boundary earlier clearly raises tau and the verdict names the shift
    (at 8 prompts x 32 tokens it measured +0.10 +- 0.08: "not clearly better")."""
    def shift(cfg):
        cfg["eagle_aux_hidden_state_layer_ids"] = [3, 5, 6]
    out = plant(tmp_path, config=shift)
    d = doctor(out, CODE_TARGET, depth=K, faults=["layer-ids-1", "layer-ids+1"], progress=False)
    probe = next(p for p in d.probes if p.name == "layer-ids-1")
    assert probe.better, d.text()
    assert d.verdict.cause == "layer-ids+1" and d.verdict.basis == "probe", d.verdict
    assert d.inputs["prompts"] == len(code_prompts()) and d.inputs["max_new_tokens"] == 64
    assert any("one pass" in n for n in d.notes)


def test_training_log_separates_the_checkpoint_from_serving(tmp_path):
    """With the shipped drafter's training accuracy as a SafeAILab EAGLE log: the shipped files
    reproduce it (check passes: look at serving); a checkpoint whose fc input blocks were
    reordered by a converter (no shape changes, no static trace) does not (the check fails; with no other check failing it says both explanations, the files or
    narrow training data, and the verdict is at medium confidence)."""
    acc = json.loads((CODE_DRAFTER_SPECULATORS.parent / "drafter_metrics.json").read_text())
    log = tmp_path / "train.log"
    log.write_text("".join(f"Train Epoch [3/3], position {i},  Acc: {a:.2f}\n"
                           for i, a in enumerate(acc["train_accuracy_per_step_ema"])))
    kw = dict(depth=K, n_prompts=N, max_new_tokens=NEW, faults=["fc-bypass"], progress=False)
    good = doctor(CODE_DRAFTER_SPECULATORS, train_log=log, **kw).check("train-accuracy")
    assert good.status == "pass" and "serving side" in good.evidence, good

    def reorder_fc(st):
        st["fc.weight"] = torch.cat(st["fc.weight"].chunk(3, dim=1)[::-1], dim=1).contiguous()
        return st
    bad = doctor(plant(tmp_path, weights=reorder_fc), CODE_TARGET, train_log=log, **kw)
    c = bad.check("train-accuracy")
    assert c.status == "fail" and "not reproduced" in c.evidence, c
    assert bad.verdict.basis == "static" and "train-accuracy" in bad.verdict.summary, bad.verdict
    # the shortfall alone cannot tell a broken file from narrow training data (the reordered fc
    # keeps 74% of the trained accuracy here): with no other check failing, not at high confidence
    assert "far from the training data" in c.evidence, c
    assert bad.verdict.confidence == "medium" and "not reproduced on these prompts" in bad.verdict.summary
    typed = doctor(CODE_DRAFTER_SPECULATORS, train_acc="0.99,0.99", **kw).check("train-accuracy")
    assert typed.status == "fail" and "(given)" in typed.evidence


def test_catalogue_table_has_every_fault_and_crash_text(pair):
    """The catalogue measures each registered fault (or says why it does not apply) and lists
    the crash-only faults with their error text; the markdown table has one row per entry."""
    cat = measure_catalogue(pair, code_prompts(N), depth=K, temperatures=(0.0,),
                            max_new_tokens=NEW, progress=False)   # the module's runs, cached
    names = [r["fault"] for r in cat["rows"]]
    assert names[0] == HEALTHY and set(f.name for f in F.FAULTS) < set(names)
    rows = {r["fault"]: r for r in cat["rows"]}
    assert rows["d2t-absolute"]["results"]["0.0"]["tau"] < rows[HEALTHY]["results"]["0.0"]["tau"]
    assert "mat1 and mat2" in rows["fc-width-mismatch"]["error_text"]
    assert markdown(cat).count("\n| `") == len(names)


@pytest.mark.slow
def test_cli_done_when_command():
    """The command from the issue, as a user runs it: exit 1 (not healthy) and a verdict line."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "eagle_nb", "doctor", "--drafter",
                        str(CODE_DRAFTER_SPECULATORS), "--observed-tau", "1.05", "--depth", "4"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 1 and p.stdout.startswith("VERDICT: observed tau 1.05 fits"), p.stderr
