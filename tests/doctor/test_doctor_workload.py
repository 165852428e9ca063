"""The doctor reads the workload (doctor/workload.py) on the code pair. Its tokenizer has no chat
template, so the template condition that applies to it is `chat-template-mismatch` (requests sent
between ChatML markers to a pair trained on raw code): a workload sent that way makes the doctor
measure the pair on the user's text (healthy) and as sent, in two one-pass runs, and rank both
beside every file fault. Planted: the tau the pair gives under that condition is named first,
the healthy tau is called healthy. Bad input: 100,000 requests are sampled and the count said; a
request past the target's context is named and left out; a file mixing chat and raw entries is
refused naming the line."""
from __future__ import annotations

import json

import pytest

from eagle_nb.conditions.templates import CHATML
from eagle_nb.doctor.run import doctor
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET
from eagle_nb.io.prompts import PromptError
from helpers import code_pair, code_prompts

KW = dict(depth=4, max_new_tokens=16, progress=False)
PLANTED = "chat-template-mismatch"


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def sent_as_chatml(tmp_path_factory):
    """Four code prompts as a client sent them: between ChatML markers, labelled by language."""
    return write(tmp_path_factory.mktemp("w") / "chatml.jsonl",
                 [{"prompt": CHATML.format(text=p), "language": "python"} for p in code_prompts(4)])


def test_a_template_ab_costs_two_one_pass_runs(pair, sent_as_chatml):
    """With no fault asked for, the workload's template A/B is the healthy run on the user's text
    and the run as sent: two computed runs, no more (the coverage and loop share reuse the first).
    Another template condition asked for is measured beside it, not refused as a combination."""
    computed = []
    real = pair._run
    pair._cache.clear()
    pair._run = lambda *a, **k: computed.append(a[1].label) or real(*a, **k)
    try:
        d = doctor(CODE_DRAFTER, pair=pair, prompts=sent_as_chatml, faults=(), **KW)
    finally:
        del pair._run
    assert sorted(computed) == sorted(["healthy", PLANTED]), computed
    assert list(d.workload["conditions"]) == [PLANTED] and d.workload["coverage"]["tokens"] > 0
    # a template condition asked for beside the workload's: each is measured in its own setting
    d = doctor(CODE_DRAFTER, pair=pair, prompts=sent_as_chatml, faults=(), conditions=("template-raw",), **KW)
    assert {h.fault for h in d.hypotheses} >= {"healthy", "template-raw", PLANTED}


def test_a_planted_condition_is_named_and_the_healthy_pair_stays_healthy(pair, sent_as_chatml):
    """The tau the pair gives under chat-template-mismatch (the engine's report) plus the workload:
    the condition is first of every hypothesis (faults included) and the verdict; the healthy
    pair's tau with the same workload: healthy. The report shows the workload: template use,
    context lengths, coverage per language, loop share."""
    raw = code_prompts(4)
    planted = pair.run(raw, conditions=(PLANTED,), **{k: KW[k] for k in ("depth", "max_new_tokens")},
                       progress=False).metrics.accept_length
    healthy = pair.run(raw, **{k: KW[k] for k in ("depth", "max_new_tokens")}, progress=False).metrics.accept_length
    assert abs(planted - healthy) > 0.3                     # the condition moves tau on this pair
    d = doctor(CODE_DRAFTER, pair=pair, prompts=sent_as_chatml, observed_tau=planted, **KW)
    top = [h.fault for h in d.hypotheses[:2]]
    assert PLANTED in top and d.verdict.cause == PLANTED, (top, d.verdict)
    assert len([h for h in d.hypotheses if h.predicted]) > 10      # ranked beside the file faults
    d = doctor(CODE_DRAFTER, pair=pair, prompts=sent_as_chatml, observed_tau=healthy, **KW)
    assert d.verdict.cause == HEALTHY, d.verdict
    text = d.text()
    for want in ("WORKLOAD", "4 of 4 requests measured", "template use: 4 rendered",
                 "target limit 1024, drafter limit 1024", "language=python", "loop share"):
        assert want in text, want
    assert d.as_dict()["workload"]["forms"]["rendered"] == 4


def test_a_workload_of_100000_requests_is_sampled_and_says_so(pair, tmp_path):
    """100,000 raw requests: the doctor measures a seeded sample (--n-prompts 2 here; SAMPLE by
    default, static only) and says how many of how many; nothing runs on the rest."""
    f = write(tmp_path / "big.jsonl", [{"prompt": f"def f{i}(x):"} for i in range(100_000)])
    d = doctor(CODE_DRAFTER, pair=pair, prompts=f, n_prompts=2, faults=(), **KW)
    assert d.workload["requests"] == 100_000 and d.workload["measured"] == d.inputs["prompts"] == 2
    assert "2 of 100,000 requests measured (a seeded sample of 2" in d.text()
    d = doctor(CODE_DRAFTER, CODE_TARGET, prompts=f, dynamic=False, progress=False)
    assert "64 of 100,000 requests taken to measure (a seeded sample of 64" in d.text()


def test_a_request_past_the_target_context_is_named_and_left_out(tmp_path):
    """A request longer than the code target's 1,024 positions is named by its number and left
    out of the measurement; a file mixing chat and raw entries is refused, naming the line."""
    long = "x = 1\n" * 800
    f = write(tmp_path / "w.jsonl", [{"prompt": "def f(x):"}, {"prompt": long}, {"prompt": "import os"}])
    d = doctor(CODE_DRAFTER, CODE_TARGET, prompts=f, dynamic=False, progress=False)
    (number, tokens), = d.workload["past_target"]
    assert number == 2 and tokens > 1024 and d.workload["measured"] == 2
    assert f"request 2 ({tokens} tokens" in d.text()
    mixed = write(tmp_path / "mixed.jsonl", [{"prompt": "def f(x):"},
                                            {"messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(PromptError, match=r"mixed.jsonl:2: a chat \('messages'\) entry after raw"):
        doctor(CODE_DRAFTER, CODE_TARGET, prompts=mixed, dynamic=False, progress=False)
