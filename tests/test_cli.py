"""The `eagle-nb` CLI on the shipped pair: capture and speculate print the documented JSON."""
import json
import os
import subprocess
import sys

import pytest

from eagle_nb.targets import SHIPPED_PROMPTS

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "eagle_nb", *args], capture_output=True, text=True,
                       env=ENV, timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_capture_json_schema_and_conventions():
    """`capture --json` reports num_layers, hidden_size, HF layer ids, per-state shapes and the
    fused shape; SpecForge ids 1,3,4 are read as HF 2,4,5 (the EAGLE-3 default for 8 layers)."""
    rc, out, err = run_cli("capture", "--prompt", "def f(x):\n    return x", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["num_layers"] == 8 and d["layer_ids"] == [2, 4, 5]
    H = d["hidden_size"]
    assert [s["layer_id"] for s in d["states"]] == [2, 4, 5]
    assert all(s["shape"][-1] == H and s["mean_norm"] > 0 for s in d["states"])
    assert d["fused_shape"][-1] == 3 * H
    rc, out, _ = run_cli("capture", "--prompt", "x = 1", "--layers", "1,3,4", "--convention",
                         "specforge", "--json")
    assert rc == 0 and json.loads(out)["layer_ids"] == [2, 4, 5]


def test_capture_bad_layer_is_a_clear_error():
    """An out-of-range id exits non-zero with a message naming the id and the valid range."""
    rc, _, err = run_cli("capture", "--prompt", "x", "--layers", "2,4,99")
    assert rc != 0 and "99" in err and "0..8" in err


def test_speculate_json_keys_and_lossless():
    """`speculate --json` carries every documented key; greedy output equals the target's own
    greedy output; the fc-bypass ablation accepts far less than the healthy pipeline."""
    keys = {"outputs", "accept_length", "per_position_acceptance", "draft_acceptance_rate",
            "conditional_alpha", "accept_histogram", "sglang_accept_rate_by_draft_tokens",
            "accept_counts", "feature_mode", "fc_policy", "layer_ids_hf", "verify_steps", "new_tokens", "matches_target_greedy",
            "tokens_per_s"}
    rows = [json.loads(line) for line in SHIPPED_PROMPTS.read_text().splitlines()[:3]]
    prompts = os.path.join(os.path.dirname(__file__), "_cli_prompts.jsonl")
    with open(prompts, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    try:
        rc, out, err = run_cli("speculate", "--prompts", prompts, "--depth", "4",
                               "--max-new-tokens", "32", "--json")
        assert rc == 0, err
        healthy = json.loads(out)
        rc, out, err = run_cli("speculate", "--prompts", prompts, "--depth", "4",
                               "--max-new-tokens", "32", "--ablate", "fc-bypass", "--json")
        assert rc == 0, err
        bypass = json.loads(out)
    finally:
        os.remove(prompts)
    assert keys <= set(healthy)
    assert len(healthy["outputs"]) == 3
    assert healthy["matches_target_greedy"] is True and bypass["matches_target_greedy"] is True
    assert len(healthy["per_position_acceptance"]) == 4
    assert healthy["accept_length"] > bypass["accept_length"] + 0.5
    assert bypass["accept_length"] == pytest.approx(1 + 4 * bypass["draft_acceptance_rate"])


def test_unknown_ablation_is_refused():
    """A misspelt --ablate name exits non-zero and lists the known names."""
    rc, _, err = run_cli("speculate", "--prompt", "x", "--ablate", "fc-bypas")
    assert rc != 0 and "fc-bypass" in err
