"""`eagle-nb speculate` and serving conditions: --condition runs the pair under a registry entry,
--verify-rule selects the T > 0 rule, and the output reports the workload's loop share and tau on
loop-free steps (code pair, in process)."""
from __future__ import annotations

import json

import pytest

from eagle_nb.cli.main import main
from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET

PAIR = ["--target", str(CODE_TARGET), "--drafter", str(CODE_DRAFTER)]


def _run(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(["speculate", *PAIR, *argv])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_verify_rule_and_loop_share_in_speculate_output(capsys):
    """--verify-rule strict at T = 0.7 reaches the setting (JSON), the JSON carries the loop
    report; the text output prints the loop share and tau on loop-free steps."""
    rc, out, err = _run(capsys, "--prompt", "def f(x):", "--max-new-tokens", "12",
                        "--temperature", "0.7", "--verify-rule", "strict", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["setting"]["verify_rule"] == "strict"
    assert d["workload"]["n"] == 6 and d["workload"]["tokens"] == 12 and "tau_loop_free" in d["workload"]
    rc, out, err = _run(capsys, "--prompt", "def f(x):", "--max-new-tokens", "12")
    assert rc == 0, err
    assert "loop share (tokens ending a repeated 6-gram" in out and "tau on loop-free verify steps" in out


def test_bad_or_inapplicable_verify_rule_is_refused(capsys, tmp_path):
    """An unknown rule is an argparse error naming the choices; a rule with a tree, or with a
    replay of a recording, exits 2 with the reason."""
    rc, _, err = _run(capsys, "--prompt", "x", "--verify-rule", "greedy")
    assert rc == 2 and "argmax" in err and "strict" in err
    rc, _, err = _run(capsys, "--prompt", "x", "--topk", "2", "--verify-rule", "argmax")
    assert rc == 2 and "applies to chains" in err
    rc, _, err = _run(capsys, "--features", str(tmp_path), "--verify-rule", "argmax")
    assert rc == 2 and "--verify-rule" in err


def test_condition_runs_the_pair_under_it_and_bad_ones_are_refused(capsys):
    """--condition target-quantized reaches the setting and the run's notes say what was
    quantized; a template mode the code tokenizer cannot render exits 2 naming why; an unknown
    name is an argparse error suggesting the nearest, and a condition given to --ablate points
    at --condition; --ablate and --condition combine."""
    rc, out, err = _run(capsys, "--prompt", "def f(x):", "--max-new-tokens", "8", "--condition",
                        "target-quantized", "--ablate", "norm-output-forced", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["setting"]["conditions"] == ["target-quantized"]
    assert d["setting"]["faults"] == ["norm-output-forced"]
    assert any("int4 weight-only RTN" in n for n in d["notes"]), d["notes"]
    rc, _, err = _run(capsys, "--prompt", "x", "--condition", "template-system-prompt")
    assert rc == 2 and "has none" in err
    rc, _, err = _run(capsys, "--prompt", "x", "--condition", "target-quantised")
    assert rc == 2 and "did you mean 'target-quantized'" in err
    rc, _, err = _run(capsys, "--prompt", "x", "--ablate", "chat-template-mismatch")   # once a fault
    assert rc == 2 and "use --condition chat-template-mismatch" in err
