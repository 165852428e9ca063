"""The fault registry is the one place a fault's facts live: every entry is complete and
consistent with its consumers, a missing fact fails loudly, and a new entry registered for the
duration of a test is picked up by the CLI, `Setting`, the doctor (static evidence, probe, severity
order), the catalogue, the panels, the palette and the engine broken-copy writer."""
from __future__ import annotations

import json

import pytest

from eagle_nb.checkpoints.broken import AUX_KEY, shift_aux_ids
from eagle_nb.doctor import catalogue, ranking
from eagle_nb.doctor.diagnosis import Check
from eagle_nb.doctor.hypotheses import ruled_out
from eagle_nb.doctor.measure import probes
from eagle_nb.doctor.state import State
from eagle_nb.doctor.verdict import decide
from eagle_nb.engines import crashes
from eagle_nb.doctor.static_checks import CHECK_IDS
from eagle_nb.engines.broken import checkpoint_faults, write_broken_drafter
from eagle_nb.experiment import fault_fns
from eagle_nb.experiment import faults as F
from helpers import code_pair, code_prompts
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS
from eagle_nb.views import palette, widgets
from helpers import FakePair

NEW = F.Fault("test-ids+2", F.SWITCH, "aux layer ids shifted two boundaries later (a test)",
              "tests/experiment/test_fault_registry.py", "write the ids the drafter was trained on",
              F.Static(("aux-ids",), "warn: test", rules_out=True), apply=fault_fns.shift(2),
              changes="layer_ids", severity=5, probe=F.Probe("test finding", "layer-ids+1"),
              checkpoint=shift_aux_ids(2), panel=True, toggle=True)
CRASH = F.Fault("test-crash", F.CRASH, "the engine dies with a test error", "tests",
                "do not run the test engine", F.NO_STATIC_TRACE,
                crash=F.Crash("vLLM", r"TEST ENGINE ERROR \d+", fault_fns.fixed_text("TEST ENGINE ERROR 7")))


def test_every_entry_is_complete_and_consistent():
    """Names are unique; static evidence names real check ids; a probe reveals a registered fault;
    the panel tables, crash texts and checkpoint writers are derived from the entries."""
    assert len(F.BY_NAME) == len(F.REGISTRY) and F.HEALTHY not in F.BY_NAME
    for f in F.REGISTRY:
        assert set(f.static.checks) <= set(CHECK_IDS), f.name
        assert f.probe is None or f.probe.reveals in F.BY_NAME
    assert F.FAULTS == F.of_kind(F.SWITCH) and F.PANEL == tuple(f.name for f in F.FAULTS if f.panel)
    assert set(F.TOGGLES) <= set(F.PANEL) and F.SHIFTS == {0: None, 1: "layer-ids+1", -1: "layer-ids-1"}
    for f in F.of_kind(F.CRASH):
        assert [n for n, _ in crashes.recognise(crashes.reproduce(f.name))] == [f.name]
    assert checkpoint_faults() == ("embed-random", "d2t-absolute", "layer-ids+1", "layer-ids-1")


def test_a_missing_fact_fails_loudly():
    """An entry without its static evidence cannot be built; a switch needs apply and changes;
    unknown names are errors, also in a doctor check, never 'no static trace'."""
    with pytest.raises(TypeError):
        F.Fault("x", F.SWITCH, "s", "r", "f")                      # static evidence omitted
    with pytest.raises(ValueError, match="apply"):
        F.Fault("x", F.SWITCH, "s", "r", "f", F.NO_STATIC_TRACE)
    with pytest.raises(ValueError, match="crash"):
        F.Fault("x", F.CRASH, "s", "r", "f", F.NO_STATIC_TRACE)
    with pytest.raises(KeyError, match="unknown fault"):
        F.entry("test-ids+2")
    with pytest.raises(KeyError, match="unknown fault"):
        Check("aux-ids", "warn", "t", "e", ["test-ids+2"])
    with pytest.raises(ValueError, match="unique"):
        with F.registered(F.REGISTRY[0]):
            pass


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def test_a_new_fault_is_picked_up_by_every_consumer(pair, tmp_path, capsys):
    """One registered entry, and nothing else edited: every consumer lists and uses it; after the
    `with` block it is gone again."""
    from eagle_nb.cli.main import main
    with F.registered(NEW, CRASH):
        # the CLI help and Setting
        with pytest.raises(SystemExit):
            main(["speculate", "--help"])
        assert "test-ids+2" in capsys.readouterr().out
        s = Setting(faults=("test-ids+2", "fc-bypass"))
        assert s.faults == ("fc-bypass", "test-ids+2") and s.label == "fc-bypass + test-ids+2"
        assert pair.wiring(Setting(faults=("test-ids+2",))).layer_ids == tuple(i + 2 for i in pair.layer_ids)
        # the doctor: static evidence (a pass rules it out), severity order, probe
        checks = [Check("aux-ids", "pass", "aux ids", "ok"),
                  Check("d2t", "fail", "d2t", "bad", ["d2t-absolute"], "fix d2t"),
                  Check("keys", "fail", "keys", "bad", ["test-ids+2", "lm-head-missing"], "fix ids")]
        assert ruled_out("test-ids+2", checks) == "aux-ids"
        v = decide(State(None, checks=checks))
        assert (v.cause, v.basis, v.fix) == ("test-ids+2", "static", "fix ids")
        assert v.also_consistent == ["lm-head-missing", "d2t-absolute"]
        prof = lambda tau: ranking.profile_from_counts([[int(tau)] * 4] * 4, depth=4)  # noqa: E731
        found = {p.name: p for p in probes({F.HEALTHY: prof(1), "test-ids+2": prof(3)}, pair)}
        assert found["test-ids+2"].better and found["test-ids+2"].message.startswith("test finding")
        # the catalogue: a measured row with its static evidence, and the crash row
        cat = catalogue.measure(pair, code_prompts(1), depth=2, temperatures=(0.0,),
                                max_new_tokens=4, faults=["test-ids+2"], progress=False)
        rows = {r["fault"]: r for r in cat["rows"]}
        assert rows["test-ids+2"]["static_check"] == "aux-ids (warn: test)"
        assert rows["test-ids+2"]["results"]["0.0"]["tau"] >= 1
        assert rows["test-crash"]["error_text"] == "TEST ENGINE ERROR 7"
        assert "`test-ids+2`" in catalogue.markdown(cat)
        assert crashes.recognise("INFO x\nERROR TEST ENGINE ERROR 3") == [("test-crash", "ERROR TEST ENGINE ERROR 3")]
        # the panels and the palette
        assert "test-ids+2" in F.PANEL and "test-ids+2" in widgets.AblationPanel(FakePair(), ["a"]).controls
        assert palette.fault_color("test-ids+2") == palette.PALETTE[F.ORDER["test-ids+2"] % len(palette.PALETTE)]
        # the engine broken-copy writer
        out = write_broken_drafter(CODE_DRAFTER_SPECULATORS, tmp_path / "b", "test-ids+2")
        ids = [json.loads((p / "config.json").read_text())[AUX_KEY] for p in (CODE_DRAFTER_SPECULATORS, out)]
        assert ids[1] == [i + 2 for i in ids[0]]
    assert "test-ids+2" not in F.PANEL and "test-crash" not in crashes.crash_faults()
    with pytest.raises(ValueError, match="unknown faults"):
        Setting(faults=("test-ids+2",))
