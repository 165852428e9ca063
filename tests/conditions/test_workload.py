"""Vocabulary coverage of a workload on the code pair (conditions/workload.py, `eagle-nb inspect
--prompts/--features`): the continuations are the pair's own greedy tokens, shares and labels
count right, a recording gives the same tokens as the loaded target, and bad flags are refused
before anything loads."""
from __future__ import annotations

import json

import pytest

from eagle_nb.cli.main import main
from eagle_nb.conditions import workload as W
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET
from eagle_nb.conditions.coverage import coverage
from eagle_nb.recordings.recording import Recording, record
from helpers import code_pair, code_prompts

NEW = 24


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


@pytest.fixture(scope="module")
def rows():
    return [{"prompt": p, "language": "python" if i % 2 else "py2", "category": "code", "line": i}
            for i, p in enumerate(code_prompts(4))]


@pytest.fixture(scope="module")
def conts(pair, rows):
    return W.workload_continuations(pair.target, pair.tokenizer, [r["prompt"] for r in rows], NEW)


def test_continuations_are_the_pairs_greedy_tokens(pair, rows, conts):
    """Each continuation starts with the tokens Pair.run (one pass, T = 0) emits for the prompt
    (which stops at EOS), and has NEW tokens."""
    res = pair.run([r["prompt"] for r in rows], Setting(depth=4, max_new_tokens=NEW), progress=False)
    for c, st in zip(conts, res.stats):
        assert len(c) == NEW and c[:len(st.tokens)] == st.tokens


def test_coverage_counts_against_a_narrowed_vocabulary(pair, rows, conts):
    """The code drafter drafts every token of these continuations; removing the most frequent
    continuation token from its vocabulary puts exactly its occurrences outside, per prompt and per
    label (the `line` field is not a grouping label); the ceiling never falls below the measured tau."""
    inside = W.drafter_mask(pair.drafter)
    full = W.prompt_coverage(inside, pair.target, pair.tokenizer, rows, NEW, depth=4)
    assert full.outside == 0 and set(full.groups) == {"language", "category"}
    top = max(set(t for c in conts for t in c), key=lambda t: sum(c.count(t) for c in conts))
    narrowed = inside.clone()
    narrowed[top] = False
    cov = coverage(conts, narrowed, 4, W.split_rows(rows)[1])
    n = sum(c.count(top) for c in conts)
    assert cov.outside == n and cov.per_prompt == [c.count(top) / len(c) for c in conts]
    assert cov.groups["category"]["code"]["outside"] == n and cov.top_outside == [(top, n)]
    assert cov.tau_ceiling < full.tau_ceiling
    res = pair.run([r["prompt"] for r in rows], Setting(depth=4, max_new_tokens=NEW), progress=False)
    assert full.tau_ceiling >= res.metrics.accept_length


def test_a_recording_gives_the_same_tokens(pair, rows, conts, tmp_path):
    """A greedy recording of the same prompts holds the same continuation tokens (its lookahead
    extends them), so its coverage counts the same tokens."""
    enc = [pair.encode(r["prompt"]) for r in rows]
    rec = record(pair.target, enc, tmp_path / "rec", pair.layer_ids, max_new_tokens=NEW, lookahead=0,
                 progress=False)
    got = W.recording_continuations(Recording(rec))
    assert [g[:NEW] for g in got] == conts


def test_inspect_reports_coverage(rows, tmp_path, capsys):
    """`eagle-nb inspect DRAFTER --target T --prompts FILE --json` adds a coverage object with
    per-label shares; the text report prints the ceiling."""
    f = tmp_path / "p.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n")
    argv = ["inspect", str(CODE_DRAFTER), "--target", str(CODE_TARGET), "--prompts", str(f),
            "--max-new-tokens", "8"]
    with pytest.raises(SystemExit) as e:
        main(argv + ["--json"])
    assert e.value.code == 0
    cov = json.loads(capsys.readouterr().out)["coverage"]
    assert cov["tokens"] == 16 and set(cov["groups"]["language"]) == {"py2", "python"}
    with pytest.raises(SystemExit):
        main(argv)
    assert "ceiling at depth 4" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [
    (["--prompts", "PROMPTS"], "--prompts needs --target"),
    (["--prompts", "PROMPTS", "--target", str(CODE_TARGET), "--max-new-tokens", "0"], "must be >= 1"),
    (["--features", "/nonexistent/rec"], "no such recording"),
    (["--prompts", "MISSING", "--target", str(CODE_TARGET)], "MISSING"),
])
def test_inspect_refuses_bad_workload_flags_before_loading(extra, message, rows, tmp_path, capsys):
    """Missing --target, a non-positive budget, an absent recording or prompt file: exit 2 with a
    message naming it."""
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(rows[0]) + "\n")
    extra = [str(f) if x == "PROMPTS" else str(tmp_path / "absent.jsonl") if x == "MISSING" else x
             for x in extra]
    with pytest.raises(SystemExit) as e:
        main(["inspect", str(CODE_DRAFTER), *extra])
    assert e.value.code == 2
    assert message in capsys.readouterr().err.replace(str(tmp_path / "absent.jsonl"), "MISSING")
