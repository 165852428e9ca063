"""Notebooks 03, 04 and 06 on a target that is not loaded: executed with `recording_path` (a
recording of the shipped target, every layer and the final state kept), they report the greedy
numbers the loaded target gives, drop what a recording cannot answer (T = 1, trees, the wrapper)
and say so. One build per session, beside the loaded build of test_notebooks.py (another file, so
xdist runs the two in parallel)."""
from __future__ import annotations

import json

import pytest

from helpers import code_pair, code_prompts
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.paths import CODE
from eagle_nb.recordings.recording import record
from eagle_nb.report import build as report_build

NOTEBOOKS = ["03_fc_bypass_ablation", "04_acceptance_vs_depth", "06_doctor"]
N, NEW = 4, 16      # prompts and new tokens given to every notebook (a small workload: the loaded
                    # build of test_notebooks.py runs the defaults)


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


@pytest.fixture(scope="module")
def built(pair, tmp_path_factory):
    root = tmp_path_factory.mktemp("recorded")
    prompts = code_prompts(N)
    rec = record(pair.target, [pair.encode(p) for p in prompts], root / "rec", "all",
                 max_new_tokens=NEW, lookahead=8, final_hidden=True,
                 eos_token_id=pair.tokenizer.eos_token_id, texts=prompts, progress=False)
    out = root / "reports"
    # the precomputed report panels are the loaded build's to test (test_notebooks.py)
    report_build.build_reports(out, params={"recording_path": str(rec), "drafter_path": str(CODE.drafter),
                                            "speculators_path": str(CODE.drafter_speculators),
                                            "n_prompts": N, "max_new_tokens": NEW,
                                            "precompute_report": False}, notebooks=NOTEBOOKS, progress=False)
    return out, json.loads((out / "results.json").read_text())["notebooks"]


def test_they_execute_on_a_recording(built):
    assert sorted(built[1]) == NOTEBOOKS
    assert all(r["error"] is None for r in built[1].values()), {n: r["error"] for n, r in built[1].items()}
    for nb in NOTEBOOKS:
        assert "target: recording" in (built[0] / f"{nb}.html").read_text()


def test_03_numbers_equal_the_loaded_target(built, pair):
    r = built[1]["03_fc_bypass_ablation"]["records"]
    prompts = code_prompts(N)
    for name, faults in (("healthy", ()), ("fc-bypass", ("fc-bypass",))):
        live = pair.run(prompts, Setting(faults=faults, depth=4, max_new_tokens=NEW), progress=False)
        assert r["tau"][name] == pytest.approx(live.metrics.accept_length, abs=1e-12), name
    assert "wrapper-capture" not in r["fault_cost_tau"] and "d2t-absolute" in r["fault_cost_tau"]
    live = pair.run(prompts, Setting(faults=("layer-ids+1",), depth=4, max_new_tokens=NEW), progress=False)
    assert r["fault_cost_tau"]["layer-ids+1"] == round(live.metrics.accept_length, 3)


def test_04_greedy_curves_and_no_sampling_or_trees(built, pair):
    r = built[1]["04_acceptance_vs_depth"]["records"]
    assert set(r["tau_vs_depth"]) == {"healthy, T=0", "fc-bypass, T=0"}
    assert list(r["tau_vs_width"]) == ["healthy"]
    live = pair.run(code_prompts(N), Setting(depth=7, max_new_tokens=NEW), progress=False)
    assert r["tau_vs_depth"]["healthy, T=0"]["7"] == pytest.approx(live.metrics.accept_length, abs=1e-12)


def test_06_doctor_on_a_recording(built):
    """The doctor measures from the recording (no target load): the observation is explained by a
    fault, the shipped files reproduce training and the random-embedding export does not."""
    r = built[1]["06_doctor"]["records"]
    assert r["observed"]["cause"] not in ("healthy", "undetermined")
    assert r["training"]["trains_fine"] == "pass" and r["training"]["converted"] == "fail"
