"""The `eagle-nb` CLI on the shipped pair: capture and speculate print the documented JSON."""
import json
import re
import os
import subprocess
import sys

import pytest

from eagle_nb.io.paths import CODE_DRAFTER, CODE_PROMPTS, CODE_TARGET

# the code pair, named (the commands' default is the real pair): its loop is ~30x cheaper
TARGET = ("--target", str(CODE_TARGET))
PAIR = (*TARGET, "--drafter", str(CODE_DRAFTER))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "eagle_nb", *args], capture_output=True, text=True,
                       env=ENV, timeout=300)
    return p.returncode, p.stdout, p.stderr


def test_capture_json_schema_and_conventions():
    """`capture --json` reports num_layers, hidden_size, HF layer ids, per-state shapes and the
    fused shape; SpecForge ids 1,3,4 are read as HF 2,4,5 (the EAGLE-3 default for 8 layers)."""
    rc, out, err = run_cli("capture", *TARGET, "--prompt", "def f(x):\n    return x", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["num_layers"] == 8 and d["layer_ids"] == [2, 4, 5]
    H = d["hidden_size"]
    assert [s["layer_id"] for s in d["states"]] == [2, 4, 5]
    assert all(s["shape"][-1] == H and s["mean_norm"] > 0 for s in d["states"])
    assert d["fused_shape"][-1] == 3 * H
    rc, out, _ = run_cli("capture", *TARGET, "--prompt", "x = 1", "--layers", "1,3,4", "--convention",
                         "specforge", "--json")
    assert rc == 0 and json.loads(out)["layer_ids"] == [2, 4, 5]


def test_capture_bad_layer_is_a_clear_error():
    """An out-of-range id exits non-zero with a message naming the id and the valid range."""
    rc, _, err = run_cli("capture", *TARGET, "--prompt", "x", "--layers", "2,4,99")
    assert rc != 0 and "99" in err and "0..8" in err


def test_speculate_json_keys_and_lossless():
    """`speculate --json` carries every documented key; greedy output equals the target's own
    greedy output; the fc-bypass ablation accepts far less than the healthy pipeline."""
    keys = {"outputs", "accept_length", "per_position_acceptance", "draft_acceptance_rate",
            "conditional_alpha", "accept_histogram", "sglang_accept_rate_by_draft_tokens",
            "accept_counts", "feature_mode", "fc_policy", "layer_ids_hf", "verify_steps", "new_tokens", "matches_target_greedy",
            "tokens_per_s"}
    rows = [json.loads(line) for line in CODE_PROMPTS.read_text().splitlines()[:3]]
    prompts = os.path.join(os.path.dirname(__file__), "_cli_prompts.jsonl")
    with open(prompts, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    try:
        rc, out, err = run_cli("speculate", *PAIR, "--prompts", prompts, "--depth", "4",
                               "--max-new-tokens", "32", "--json")
        assert rc == 0, err
        healthy = json.loads(out)
        rc, out, err = run_cli("speculate", *PAIR, "--prompts", prompts, "--depth", "4",
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
    rc, _, err = run_cli("speculate", *PAIR, "--prompt", "x", "--ablate", "fc-bypas")
    assert rc != 0 and "fc-bypass" in err


def _help(capsys, *args) -> str:
    from eagle_nb.cli.main import main
    with pytest.raises(SystemExit) as e:
        main([*args, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def test_help_explains_every_command_and_option(capsys):
    """The top-level help has a description and examples; every command's help has its purpose,
    examples, and help text for every option, with defaults shown; --ablate lists every fault of
    the registry; --max-new-tokens defaults to the notebooks' 32."""
    import re

    from eagle_nb.experiment.faults import FAULTS
    top = _help(capsys)
    assert "find out why an EAGLE-3 drafter" in top and "examples:" in top
    for cmd in ("capture", "inspect", "convert", "speculate", "report"):
        text = _help(capsys, cmd)
        assert "examples:" in text and f"eagle-nb {cmd} " in text, cmd
        body = text.split("options:")[1].split("examples:")[0]
        for flag in set(re.findall(r"\[(--[a-z-]+)", text.split("\n\n")[0])):
            line = re.search(rf"^  (?:-\w, )?{flag}\b.*(?:\n {{20,}}.*)*", body, re.M)
            words = re.sub(rf"^  (?:-\w, )?{flag}( [A-Z_]+)?", "", line.group(0)).split()
            assert len(words) >= 3, (cmd, flag, line.group(0))      # a real help text
    spec = " ".join(_help(capsys, "speculate").split())
    assert all(f.name in spec for f in FAULTS)
    assert "new tokens generated per prompt (default: 32)" in spec and "(default: 4)" in spec


def test_convert_prints_what_it_renamed_and_translated(tmp_path):
    """convert names the renamed tensors, the layer ids before and after (translated between
    conventions) and the d2t verdict; it writes model.safetensors 0644 (umask 022); quiet by
    default (no loading bars)."""
    from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS
    os.umask(0o022)
    from eagle_nb.io.paths import CODE_TARGET
    rc, out, err = run_cli("convert", str(CODE_DRAFTER_SPECULATORS), str(tmp_path / "d"), "--to", "sglang",
                           "--target", str(CODE_TARGET))   # its embed_tokens is the target's
    assert rc == 0, err
    assert "format speculators -> sglang;" in out and "tensors renamed" in out
    assert "layers.0.mlp.up_proj.weight -> midlayer.mlp.up_proj.weight" in out or "more (--verbose" in out
    assert "layer ids: [2, 4, 5] at top level (HF ids) -> [1, 3, 4] in eagle_config" in out
    assert "d2t: offsets (ok) -> offsets (ok)" in out
    assert oct((tmp_path / "d" / "model.safetensors").stat().st_mode & 0o777) == "0o644"
    assert "Loading weights" not in err


def test_speculate_prints_speedup_and_is_quiet():
    """speculate ends with the measured speedup over target-only greedy decoding; no library
    progress bars on stderr unless --verbose."""
    rc, out, err = run_cli("speculate", *PAIR, "--prompt", "def f(x):", "--max-new-tokens", "8")
    assert rc == 0, err
    assert re.search(r"^speedup: \d+\.\d\dx over target-only greedy decoding", out, re.M), out
    assert "Loading weights" not in err, err
