"""The notebooks on their defaults, the real pair (SmolLM2-135M-Instruct and the drafter the kit
trained for it), as `make reports` runs them: every notebook executes and the numbers it records
describe that pair. Opt-in (`-m slow`): the default suite runs the notebooks on the code pair
(test_notebooks.py); the build's seconds are measured by benchmarks/budgets.py."""
from __future__ import annotations

import json

import pytest

from eagle_nb.io.paths import REAL
from eagle_nb.report import build as report_build

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not REAL.target.is_dir(), reason=f"{REAL.target} is set up by `make install`")]
NOTEBOOKS = ["01", "02", "03", "04", "06"]      # 05 needs the engines: tests/engines cover them


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("real")
    report_build.build_reports(out, notebooks=NOTEBOOKS, progress=False)
    return json.loads((out / "results.json").read_text())["notebooks"]


def test_every_notebook_runs_on_the_real_pair(built):
    assert len(built) == len(NOTEBOOKS)
    assert all(r["error"] is None for r in built.values()), {n: r["error"] for n, r in built.items()}


def test_the_records_describe_the_real_pair(built):
    """SmolLM2-135M has 30 decoder layers and H = 576: the fused state is 3 x 576 wide; the healthy
    drafter accepts something (tau > 1.2) and fc-bypass keeps less of it; the doctor's static part
    passes the shipped files."""
    r02 = built["02_hidden_state_shapes"]["records"]
    assert r02["fused_shape"][-1] == 3 * 576
    tau = built["03_fc_bypass_ablation"]["records"]["tau"]
    assert tau["healthy"] > 1.2 and tau["fc-bypass"] < tau["healthy"]
    static = built["06_doctor"]["records"]["static"]
    assert static["cause"] == "healthy" and "fail" not in static["statuses"].values()
    training = built["06_doctor"]["records"]["training"]     # the real target's fc inputs warn the
    assert training["trains_fine"] == "pass"                 # fp16 range check; the random embedding
    assert training["converted"] == "fail" and training["converted_cause"] == "embed-random"   # leads
