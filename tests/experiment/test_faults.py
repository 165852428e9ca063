"""Tests for eagle_nb.experiment.faults and eagle_nb.experiment.setting: every registered fault is a pure transformation
of what the loop is given (it changes only the fields it declares, mutates no module), costly fault
objects are built once per pair, fault lists are validated and put in application order, and a
`Setting` is a hashable cache key checked by SpecConfig.

Runs on the shipped pair (8-layer target, loads in seconds); no speculation except the cache test.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from eagle_nb.experiment import faults as F
from eagle_nb.experiment.results import Sweep
from helpers import code_pair, code_prompts
from eagle_nb.experiment.setting import Setting, grid
from helpers import wiring_changes


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


@pytest.mark.parametrize("fault", [f.name for f in F.FAULTS])
def test_each_fault_changes_only_what_it_declares_and_mutates_nothing(pair, fault):
    """Applied to the healthy wiring, a fault changes at least one field, only the fields its
    registry entry names, adds its story as a note, and leaves the pair's target and drafter
    (weights, d2t buffer) untouched."""
    entry = F.BY_NAME[fault]
    assert entry.story and entry.reference and entry.changes
    before = {k: v.clone() for k, v in pair.drafter.state_dict().items()}
    healthy = pair.wiring()
    try:
        w = pair.wiring(Setting(faults=(fault,)))
    except F.NotApplicable as e:     # exercised on a pair where it applies: test_faults_that_need_...
        pytest.skip(f"{fault} does not apply to the shipped pair: {e}")
    changed = wiring_changes(healthy, w)
    declared = {c.strip() for c in entry.changes.split(",")}
    assert changed and changed <= declared, (changed, declared)
    assert w.notes[-1] == f"{fault}: {entry.story}"
    after = pair.drafter.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert pair.wiring() == healthy


def test_fault_effects_on_the_wiring(pair):
    """What each story says: fc-bypass hands over the final state under the width check; the
    layer shifts move every id by one; d2t-absolute uses d2t - arange; the wrapper is found
    unusable by engine-style capture; the engine-style drafter is another module."""
    w = pair.wiring(Setting(faults=("fc-bypass",)))
    assert (w.features, w.fc_policy) == ("final-hidden", "engine-width-check")
    ids = tuple(pair.layer_ids)
    assert pair.wiring(Setting(faults=("layer-ids+1",))).layer_ids == tuple(i + 1 for i in ids)
    assert pair.wiring(Setting(faults=("layer-ids-1",))).layer_ids == tuple(i - 1 for i in ids)
    d2t = pair.drafter.d2t
    w = pair.wiring(Setting(faults=("d2t-absolute",)))
    assert torch.equal(w.d2t, d2t - torch.arange(d2t.numel()))
    w = pair.wiring(Setting(faults=("wrapper-capture",)))
    assert w.target is not pair.target and w.features == "final-hidden"
    assert any("found no `model.layers`" in n for n in w.notes)
    w = pair.wiring(Setting(faults=("layers0-keys-dropped",)))
    assert w.drafter is not pair.drafter and w.d2t is None


def test_costly_fault_objects_are_built_once_per_pair(pair):
    """The wrapper model and the engine-style drafter are the same objects on every application."""
    s = Setting(faults=("layers0-keys-dropped", "wrapper-capture"))
    a, b = pair.wiring(s), pair.wiring(s)
    assert a.drafter is b.drafter and a.target is b.target
    assert pair.wiring(Setting(faults=("wrapper-capture",))).target is a.target


def test_fault_names_are_checked_and_ordered():
    """Unknown or repeated names are refused; any listing order gives the registry's application
    order, so two spellings of one setting are one cache key; the panel's shift maps to ±1."""
    with pytest.raises(ValueError, match="unknown faults"):
        Setting(faults=("nope",))
    with pytest.raises(ValueError, match="twice"):
        Setting(faults=("fc-bypass", "fc-bypass"))
    a = Setting(faults=("fc-bypass", "layers0-keys-dropped"))
    assert a.faults == ("layers0-keys-dropped", "fc-bypass")
    assert a == Setting(faults=("layers0-keys-dropped", "fc-bypass")) and len({a, a.but()}) == 1
    assert F.ablations_for(["fc-bypass", "layers0-keys-dropped"], 1) == \
        ("layers0-keys-dropped", "fc-bypass", "layer-ids+1")
    assert Setting.of([], -1).faults == ("layer-ids-1",) and Setting.of([], -1).layer_shift == -1
    with pytest.raises(ValueError, match="layer_shift"):
        F.ablations_for([], 2)
    assert set(F.TOGGLES) <= set(F.BY_NAME) and set(F.SHIFTS.values()) - {None} <= set(F.BY_NAME)


def test_setting_is_validated_by_specconfig_and_serialisable():
    """Depth and temperature go through SpecConfig's checks; as_dict is plain data."""
    with pytest.raises(ValueError, match="depth"):
        Setting(depth=0)
    with pytest.raises(ValueError, match="temperature"):
        Setting(temperature=-1)
    s = Setting(faults=("fc-bypass",), layer_ids=[5, 2, 4], depth=3)
    assert s.layer_ids == (2, 4, 5) and s.label == "fc-bypass, layers [2, 4, 5]"
    assert s.as_dict() == {"faults": ["fc-bypass"], "layer_ids": [2, 4, 5], "depth": 3,
                           "temperature": 0.0, "max_new_tokens": 64, "seed": 0, "topk": 1,
                           "num_draft_tokens": 4, "verify_rule": None, "conditions": []}
    assert [x.faults for x in grid([(), ("fc-bypass",)], depths=(1, 2))] == \
        [(), (), ("fc-bypass",), ("fc-bypass",)]


def test_run_is_cached_per_setting_and_sweep_regroups(pair):
    """Equal settings hit the cache (same RunResult object); a Sweep holds one result per setting
    and regroups them as curves over depth, results at one depth, and a DataFrame."""
    prompts = code_prompts(1)
    r = pair.run(prompts, Setting(depth=2, max_new_tokens=8), progress=False)
    assert pair.run(prompts, depth=2, max_new_tokens=8, progress=False) is r
    assert r.setting == Setting(depth=2, max_new_tokens=8) and r.wiring["feature_mode"] == "aux"
    sw = pair.sweep(prompts, grid([(), ("fc-bypass",)], depths=(1, 2), max_new_tokens=8),
                    progress=False)
    assert isinstance(sw, Sweep) and len(sw) == 4
    assert sw[Setting(depth=2, max_new_tokens=8)] is r
    assert sorted(sw.curves()) == ["fc-bypass, T=0", "healthy, T=0"]
    assert sorted(sw.curves()["healthy, T=0"]) == [1, 2]
    assert set(sw.by_label(2, 0.0)) == {"healthy", "fc-bypass"}
    df = sw.frame()
    assert len(df) == 4 and {"label", "depth", "accept_length", "tokens_per_s"} <= set(df.columns)
    assert df.loc[(df.label == "healthy") & (df.depth == 2), "accept_length"].item() == \
        r.metrics.accept_length
    with pytest.raises(TypeError, match="either a Setting"):
        pair.run(prompts, Setting(), depth=3)
    assert dataclasses.is_dataclass(r.setting)


def test_reference_check_decodes_the_target_once_per_prompt(pair, monkeypatch):
    """Reference checks of several faults on the same prompts decode the target-only greedy
    reference once per prompt (it is the same target), and every run still matches it."""
    import eagle_nb.experiment.pair as P
    calls = []
    real = P.greedy_reference

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(P, "greedy_reference", counted)
    prompts = code_prompts(2)
    runs = [pair.run(prompts, depth=2, max_new_tokens=7, faults=f, check_reference=True, progress=False)
            for f in ((), ("fc-bypass",), ("d2t-absolute",))]
    assert len(calls) == 2 and all(r.matches_target_greedy for r in runs)
    assert len({r.reference_s for r in runs}) == 1          # the one decode's seconds


def test_faults_that_need_another_pair_apply_where_they_can(pair):
    """The faults that do not apply to the shipped pair undo what another fault set up: the
    target's embedding over a random one, the default ids over shifted ones, a dropped
    norm_before_fc / norm_output over a drafter that has them; the pair stays untouched."""
    healthy = pair.wiring()
    b = pair.builds
    w = pair.wiring(Setting(faults=("embed-random", "embed-target-forced")))
    assert torch.equal(w.drafter.embed_tokens.weight, pair.target.get_input_embeddings().weight)
    shifted = F.BY_NAME["layer-ids+1"].apply(healthy, b)
    assert F.BY_NAME["layer-ids-heuristic"].apply(shifted, b).layer_ids == healthy.layer_ids
    for flag in ("norm_before_fc", "norm_output"):
        name = flag.replace("_", "-")
        on = F.BY_NAME[f"{name}-forced"].apply(healthy, b)
        assert getattr(on.drafter.config, flag) and not getattr(pair.drafter.config, flag)
        off = F.BY_NAME[f"{name}-dropped"].apply(on, b)
        assert not getattr(off.drafter.config, flag)
    with pytest.raises(F.NotApplicable):
        F.BY_NAME["norm-output-dropped"].apply(healthy, b)
    x = torch.randn(1, 3, pair.drafter.config.fc_in_features)
    on = F.BY_NAME["norm-before-fc-forced"].apply(healthy, b).drafter
    assert not torch.allclose(on.fuse(x), pair.drafter.fuse(x))   # the untrained norm changes fc
    assert not hasattr(pair.drafter, "input_norm")


def test_catalogue_drafter_faults_do_what_their_story_says(pair):
    """Drafter faults on the shipped pair, checked on one forward: random embedding / head are new
    weights of the same shape and scale; the wrong RoPE theta changes the draft's rotary table;
    the residual bug subtracts the layer's input state; fp16 fc equals fc computed in half."""
    healthy, d = pair.wiring(), pair.drafter
    get = lambda name: pair.wiring(Setting(faults=(name,))).drafter  # noqa: E731
    e = get("embed-random").embed_tokens.weight
    assert e.shape == d.embed_tokens.weight.shape and not torch.allclose(e, d.embed_tokens.weight)
    assert abs(float(e.detach().std()) / float(d.embed_tokens.weight.detach().std()) - 1) < 0.05
    assert not torch.equal(get("lm-head-missing").lm_head.weight, d.lm_head.weight)
    r = get("rope-theta-wrong")
    assert r.config.rope_theta != d.config.rope_theta and not torch.allclose(r.inv_freq, d.inv_freq)
    g = torch.randn(1, 3, d.config.hidden_size)
    ids = torch.tensor([[5, 6, 7]])
    nr = get("output-norm-residual")
    with torch.no_grad():
        (_, h_ok), (_, h_bug) = d.step(ids, g), nr.step(ids, g)
        assert torch.allclose(h_ok - g, h_bug, atol=1e-5)
        x = torch.randn(1, 2, d.config.fc_in_features)
        half = torch.nn.functional.linear(x.half(), d.fc.weight.half()).float()
        assert torch.equal(get("fp16-fc-overflow").fuse(x), half)
        assert not torch.isfinite(get("fp16-fc-overflow").fuse(x * 1e5)).all()   # past 65504
    assert healthy == pair.wiring()
