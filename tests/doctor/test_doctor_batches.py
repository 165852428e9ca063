"""Several observations of one served pair (vLLM logs of the same drafter at batch size 1 and 16):
greedy tau that moves between them names the engine, not the drafter; tau that agrees within the
spread passes and the ranking goes on as for one observation."""
from __future__ import annotations

import subprocess
import sys

import pytest

from eagle_nb.doctor.observations import CHECK_ID, agreement
from eagle_nb.doctor.run import doctor
from eagle_nb.engines import observation as observed
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET

K = 4


def vllm_log(path, taus):
    """One `SpecDecoding metrics` line per tau (per-position rates that add up to tau - 1)."""
    lines = []
    for t in taus:
        per = [(t - 1) * w for w in (0.4, 0.3, 0.2, 0.1)]
        lines.append(f"INFO 12-05 10:00:00 [metrics.py:1] SpecDecoding metrics: Mean acceptance length: "
                     f"{t:.2f}, Accepted: {int(100 * (t - 1))} tokens, Drafted: 400 tokens, Per-position "
                     f"acceptance rate: {', '.join(f'{p:.3f}' for p in per)}, Avg Draft acceptance rate: "
                     f"{25 * (t - 1):.1f}%")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_agreement_allows_the_spread_and_names_the_pair_apart(tmp_path):
    one = observed.observe(log=vllm_log(tmp_path / "b1.log", [2.10, 2.14, 2.06, 2.12]))
    same = observed.observe(log=vllm_log(tmp_path / "b16.log", [2.08, 2.04, 2.12, 2.10]))
    low = observed.observe(log=vllm_log(tmp_path / "b64.log", [1.62, 1.58, 1.60, 1.64]))
    assert agreement([one]) is None
    assert agreement([one, same]).status == "pass"
    c = agreement([one, same, low])
    assert c.status == "warn" and c.id == CHECK_ID and "1.610" in c.evidence and c.fix


def test_greedy_tau_moving_with_batch_size_names_the_engine(tmp_path):
    logs = [vllm_log(tmp_path / "b1.log", [2.10, 2.14, 2.06, 2.12]),
            vllm_log(tmp_path / "b16.log", [1.62, 1.58, 1.60, 1.64])]
    d = doctor(CODE_DRAFTER_SPECULATORS, CODE_TARGET, observed_log=logs, dynamic=False, progress=False)
    assert d.verdict.cause == "engine" and d.verdict.basis == "observations", d.text()
    assert "no drafter fault" in d.verdict.summary and d.check(CHECK_ID).status == "warn"
    assert d.observation["tau"] == pytest.approx(2.105, abs=1e-3)          # the first is ranked
    same = [logs[0], vllm_log(tmp_path / "b16same.log", [2.08, 2.04, 2.12, 2.10])]
    d = doctor(CODE_DRAFTER_SPECULATORS, CODE_TARGET, observed_log=same, dynamic=False, progress=False)
    assert d.verdict.cause != "engine" and d.check(CHECK_ID).status == "pass"


def test_cli_takes_observed_more_than_once(tmp_path):
    logs = [vllm_log(tmp_path / "b1.log", [2.10, 2.14]), vllm_log(tmp_path / "b16.log", [1.55, 1.58])]
    r = subprocess.run([sys.executable, "-m", "eagle_nb", "doctor", "--drafter",
                        str(CODE_DRAFTER_SPECULATORS), "--target", str(CODE_TARGET), "--static-only",
                        "--observed", logs[0], "--observed", logs[1]], capture_output=True, text=True)
    assert r.returncode == 1 and "cause: engine" in r.stdout, r.stdout + r.stderr
