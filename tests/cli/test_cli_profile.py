"""`eagle-nb profile` and `eagle-nb tune` (eagle_nb/cli/profile.py, tune.py): a profile measured on
the code pair is written and read back; engine payloads and existing profiles need no torch; the
engines' knobs and the tune table print; bad input exits 2 with the field named."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eagle_nb.cli import main as cli_main
from eagle_nb.io.paths import CODE_DRAFTER, CODE_PROMPTS, CODE_TARGET
from eagle_nb.profiles.profile import SpeculationProfile, write_profile


def cli(capsys, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        cli_main.main(list(args))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def profile_file(tmp_path):
    # 100 steps at k = 4: marginal 0.8, 0.55, 0.3, 0.1; AL 2.75
    p = SpeculationProfile.from_histogram([20, 25, 25, 20, 10], 4, conditions={"depth": 4})
    return write_profile(p, tmp_path)


def test_measured_on_the_code_pair_and_read_back(capsys, tmp_path):
    rc, out, err = cli(capsys, "profile", "--target", str(CODE_TARGET), "--drafter", str(CODE_DRAFTER),
                       "--prompts", str(CODE_PROMPTS), "--depth", "3", "--max-new-tokens", "16",
                       "--out", str(tmp_path), "--to", "vllm")
    assert rc == 0, err
    d = json.loads((tmp_path / "speculation_profile.json").read_text())
    assert d["num_speculative_tokens"] == 3 and len(d["marginal_accept_rates"]) == 3
    assert d["measurement_conditions"]["prompts"]["source"] == str(CODE_PROMPTS)
    assert "marginal_accept_rates (P(drafts 1..i+1 all accepted)" in out
    assert '"rejection_sample_method": "synthetic"' in out and str(CODE_DRAFTER) in out
    rc, out, err = cli(capsys, "profile", "--from", str(tmp_path), "--json")
    assert rc == 0 and json.loads(out)["marginal_accept_rates"] == d["marginal_accept_rates"]


def run_alone(command: str, *args) -> str:
    """Run one command module parsed and run alone (the dispatcher imports every command module,
    some of which import torch); its stdout, then whether torch was imported."""
    code = ("import argparse, sys\nfrom eagle_nb.cli import " + command + " as c\n"
            "a = c.add_parser(argparse.ArgumentParser().add_subparsers()).parse_args(sys.argv[1:])\n"
            "assert c.run(a) == 0\nprint('TORCH', 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    out, flag = r.stdout.rsplit("TORCH", 1)
    assert flag.strip() == "False", f"{command} imported torch"
    return out


def test_knobs_and_tune_from_a_profile_without_torch(profile_file):
    """Reading a profile, printing the engines' settings and tuning from given costs never import
    torch."""
    out = run_alone("profile", "--from", str(profile_file), "--to", "vllm", "--to", "sglang", "--to",
                    "trtllm", "--num-speculative-tokens", "2", "--json")
    d = json.loads(out)["engines"]
    assert d["vllm"]["speculative_config"]["synthetic_acceptance_rates"] == [0.8, 0.55]
    assert d["sglang"]["env"]["SGLANG_SIMULATE_ACC_LEN"] == "2.3500"
    assert d["trtllm"]["env"]["TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS"] == "1.3500"
    out = run_alone("tune", str(profile_file), "--t-draft", "0.2", "--t-verify", "1", "--json")
    assert json.loads(out)["best"]["1"]["k"] >= 1


def test_vllm_responses_and_llama_logs(capsys, tmp_path):
    spec = {"mean_acceptance_length": 2.0, "draft_acceptance_rate": 0.5, "acceptance_histogram": [1, 0, 1],
            "num_spec_steps": 2, "num_accepted_draft_tokens": 2, "num_draft_tokens": 4, "num_spec_tokens": 2}
    f = tmp_path / "r.jsonl"
    f.write_text("\n".join(json.dumps({"metrics": {"speculative_decoding": spec}}) for _ in range(3)))
    rc, out, err = cli(capsys, "profile", "--vllm-responses", str(f), "--json")
    assert rc == 0, err
    assert json.loads(out)["marginal_accept_rates"] == [0.5, 0.5]
    log = tmp_path / "llama.log"
    log.write_text("srv  accepted  1/ 2 draft tokens\nsrv  accepted  2/ 2 draft tokens\n")
    rc, out, err = cli(capsys, "profile", "--llama-log", str(log), "--json")
    assert rc == 0 and json.loads(out)["marginal_accept_rates"] == [1.0, 0.5]


@pytest.mark.parametrize("make, args, field", [
    (lambda p: p.update(marginal_accept_rates=[0.5, 0.6, 0.3, 0.1]), ["--to", "vllm"],
     "marginal_accept_rates increase at position 1"),
    (lambda p: p.update(num_speculative_tokens=5), [], "num_speculative_tokens is 5"),
    (lambda p: None, ["--to", "vllm", "--num-speculative-tokens", "6"],
     "num_speculative_tokens 6 is deeper than the profile's 4"),
    (lambda p: p.update(acceptance_length_histogram={"1": 0}), [], "acceptance_length_histogram has no steps"),
])
def test_bad_profiles_exit_2_naming_the_field(capsys, profile_file, make, args, field):
    d = json.loads(profile_file.read_text())
    make(d)
    profile_file.write_text(json.dumps(d))
    rc, _, err = cli(capsys, "profile", "--from", str(profile_file), *args)
    assert rc == 2 and field in err, err


def test_engine_payload_without_per_request_metrics(capsys, tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps([{"id": "cmpl-1", "choices": [{"text": "x"}]}]))
    rc, _, err = cli(capsys, "profile", "--vllm-responses", str(f))
    assert rc == 2 and "metrics.speculative_decoding is missing" in err
    assert "--per-request-spec-decode-metrics" in err


def test_tune_worked_example(capsys, tmp_path):
    """The issue's example: a draft 1.68x faster than the target, alpha 0.813: k = 5 is below
    break-even (0.832), the best is k = 1; --plot writes a PNG; --json carries the flags."""
    marginal = [0.81293 ** (i + 1) for i in range(5)]
    p = SpeculationProfile(5, [0.81293] * 5, marginal, 1 + sum(marginal))
    path = write_profile(p, tmp_path)
    png = tmp_path / "t.png"
    rc, out, err = cli(capsys, "tune", str(path), "--t-draft", str(1 / 1.68), "--t-verify", "1",
                       "--plot", str(png))
    assert rc == 0, err
    assert "0.832" in out and "best: k = 1; vLLM num_speculative_tokens=1" in out
    assert png.read_bytes().startswith(b"\x89PNG")
    costs = tmp_path / "c.csv"
    costs.write_text("batch_size,t_draft,t_verify\n1,0.595,1\n8,0.7,1.3\n")
    rc, out, err = cli(capsys, "tune", str(path), "--costs", str(costs), "--json")
    d = json.loads(out)
    assert rc == 0 and d["best"]["1"]["k"] == 1
    assert d["best"]["1"]["flags"]["sglang"]["--speculative-num-draft-tokens"] == 2


def test_tune_warns_for_costs_at_a_batch_size_the_profile_was_not_measured_at(capsys, tmp_path):
    """A profile measured at batch size 1 (the kit's, `measurement_conditions.batch_size`) tuned
    with costs at batch 8: the table is printed, and the named warning gives both sizes."""
    from eagle_nb.profiles.tune import UnmeasuredBatchSizeWarning
    p = SpeculationProfile.from_histogram([10, 20, 30, 40], 3, conditions={"batch_size": 1})
    path = write_profile(p, tmp_path)
    with pytest.warns(UnmeasuredBatchSizeWarning, match="measured at batch size 1.*batch size 8"):
        rc, out, err = cli(capsys, "tune", str(path), "--t-draft", "0.1", "--t-verify", "1",
                           "--batch-size", "8")
    assert rc == 0 and "batch size 8" in out, err


@pytest.mark.parametrize("args, msg", [
    (["--t-draft", "0.5"], "--t-draft and --t-verify go together"),
    (["--costs", "c.json", "--t-verify", "1"], "--t-verify goes with --t-draft"),
    (["--t-draft", "0.5", "--t-verify", "1", "--k-max", "9"], "num_speculative_tokens = 4"),
    (["--measure", "--batch-sizes", "1,x"], "--batch-sizes"),
    (["--t-draft", "0.5", "--t-verify", "0"], "t_verify[0] must be"),
])
def test_tune_bad_input(capsys, profile_file, args, msg):
    rc, _, err = cli(capsys, "tune", str(profile_file), *args)
    assert rc == 2 and msg in err, err
