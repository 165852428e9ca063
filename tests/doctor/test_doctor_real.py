"""The doctor on the real pair (SmolLM2-135M-Instruct and the drafter the kit trained for it):
planted faults it has not seen are named, and the healthy pair is called healthy.

Files planted by the engines' own writer (`engines.write_broken_drafter`, what notebook 05 serves
to vLLM) or by a key rename: d2t-absolute, layer-ids+1, `midlayer.*` saved as `layers.0.*`.
Observations held out: the kit's loop under a fault on prompts 8-15 of the shipped 16, given to a
doctor that measures prompts 0-7 (64 tokens each); the real target is a text decoder, so
wrapper-capture is ruled out by the target's layout and its twin fc-bypass (identical on this
pair) must be named. One loaded pair per module, shared through its run cache."""
from __future__ import annotations

import shutil

import pytest
from safetensors.torch import load_file, save_file

from eagle_nb.doctor.run import doctor
from eagle_nb.engines.broken import write_broken_drafter
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.experiment.profile_run import measure_profile
from eagle_nb.io.paths import REAL

pytestmark = pytest.mark.skipif(not REAL.target.is_dir(), reason=f"{REAL.target} is set up by `make install`")
K = 4
NEW = 64          # the doctor's default length: tau at 16 tokens (2.2) is not tau at 64 (1.6)
KW = dict(depth=K, n_prompts=8, max_new_tokens=NEW, progress=False)


@pytest.fixture(scope="module")
def pair():
    from eagle_nb.experiment.pair import Pair
    p = Pair()                      # the shipped default: the real pair
    p.sampled_one_pass = False
    return p


def observed(pair, fault: str) -> dict:
    """What an engine serving the pair under `fault` would report, from prompts the doctor does
    not measure."""
    prof = measure_profile(pair, pair.prompts(16)[8:], K, max_new_tokens=NEW,
                           faults=() if fault == HEALTHY else (fault,))
    return dict(observed_tau=prof.mean_accept_length,
                observed_per_position=list(prof.marginal_accept_rates))


def test_the_real_pair_is_healthy(pair):
    """The shipped files pass (no check fails) and the verdict is healthy, with and without a
    held-out observation of the healthy pair."""
    assert pair.num_layers == 30 and "SmolLM2" in str(pair.target_path)
    d = doctor(REAL.drafter, pair=pair, **KW)
    assert "fail" not in {c.status for c in d.checks}, d.text()
    assert d.healthy and d.verdict.cause == HEALTHY
    d = doctor(REAL.drafter, pair=pair, **KW, **observed(pair, HEALTHY))
    assert d.verdict.cause == HEALTHY and "consistent with a healthy pair" in d.verdict.summary, d.text()
    far = {"d2t-absolute", "fc-bypass", "lm-head-missing", "layers0-keys-dropped"}
    assert not far & set(d.verdict.also_consistent)


def test_planted_d2t_absolute_and_key_rename_are_named_from_the_files(tmp_path):
    """d2t stored as the offsets minus arange (an engine adding i then lands on offset[i]) and the
    decoder layer's keys renamed `layers.0.*`: each fails its own static check, naming its fault."""
    d2t = write_broken_drafter(REAL.drafter, tmp_path / "d2t", "d2t-absolute", REAL.target)
    d = doctor(d2t, REAL.target, dynamic=False, progress=False)
    assert d.check("d2t").status == "fail" and d.check("d2t").faults == ["d2t-absolute"], d.text()
    assert d.verdict.cause == "d2t-absolute" and d.verdict.basis == "static"
    keys = shutil.copytree(REAL.drafter, tmp_path / "keys")
    st = load_file(str(keys / "model.safetensors"))
    assert any(k.startswith("midlayer.") for k in st)
    save_file({k.replace("midlayer.", "layers.0."): v for k, v in st.items()}, str(keys / "model.safetensors"))
    d = doctor(keys, REAL.target, dynamic=False, progress=False)
    assert d.check("keys").status == "fail" and "layers0-keys-dropped" in d.check("keys").faults, d.text()
    assert d.verdict.cause == "layers0-keys-dropped"


def test_planted_layer_ids_plus_1_is_named_by_the_probe(tmp_path):
    """The engines' writer spells out the target's default aux ids in the EAGLE-format config and
    shifts them one boundary late; no observation: at the default workload (16 prompts x 64
    tokens, one pass) reading one boundary earlier clearly raises tau, and the verdict names the
    shift."""
    bad = write_broken_drafter(REAL.drafter, tmp_path / "ids", "layer-ids+1", REAL.target)
    d = doctor(bad, REAL.target, depth=K, faults=["layer-ids-1", "layer-ids+1"], progress=False)
    probe = next(p for p in d.probes if p.name == "layer-ids-1")
    assert probe.better and probe.tau > probe.baseline_tau, d.text()
    assert d.verdict.cause == "layer-ids+1" and d.verdict.basis == "probe", d.verdict


@pytest.mark.parametrize("fault, named", [("d2t-absolute", {"d2t-absolute"}),
                                          ("wrapper-capture", {"fc-bypass"})])
def test_held_out_observation_under_a_fault_names_it(pair, fault, named):
    """The observation of the pair under `fault` on held-out prompts: the fault (or, for
    wrapper-capture on this text target, its twin fc-bypass) is the verdict or listed as equally
    consistent, and the healthy pair ranks below it. (layer-ids+1 costs this pair about 0.1 tau,
    less than the spread between these two halves of the prompts: from numbers alone the doctor
    calls it healthy and lists the shift as not told apart; its files are named by the probe.)"""
    d = doctor(REAL.drafter, pair=pair, **KW, **observed(pair, fault))
    top = {d.verdict.cause, *d.verdict.also_consistent}
    assert named <= top and HEALTHY not in top, d.text()
    ranked = [h.fault for h in d.hypotheses if h.distance is not None]
    assert ranked.index(HEALTHY) > min(ranked.index(n) for n in named)
    if fault == "wrapper-capture":
        wrapper = next(h for h in d.hypotheses if h.fault == "wrapper-capture")
        assert wrapper.ruled_out_by == "target-layout" and d.check("target-layout").status == "pass"
