"""The doctor's `--observed FILE` on a file of vLLM responses with per-request metrics (vLLM 0.32,
`--per-request-spec-decode-metrics detailed`; the fields of `RequestSpecDecodeMetrics`,
vllm/v1/metrics/stats.py): τ and per-position rates of the pooled histogram, the depth, each
request's τ; JSON lines, a JSON list and bare metrics objects alike; a JSON file without the field
is refused naming it and the flag; anything that is not JSON stays a log."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eagle_nb.doctor import diagnosis
from eagle_nb.doctor.run import doctor
from eagle_nb.engines import observation as observed
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET

K = 4
STEPS = [[0, 2, 4, 1], [0, 0, 1], [3, 1]]       # accepted drafts per verify step, per request


def spec(per_step: list[int], k: int = K) -> dict:
    """One request's `metrics.speculative_decoding`, as `RequestSpecDecodeMetrics.to_dict` writes it."""
    hist = [0] * (k + 1)
    for a in per_step:
        hist[a] += 1
    n, acc = len(per_step), sum(per_step)
    return {"mean_acceptance_length": 1 + acc / n, "draft_acceptance_rate": acc / (n * k),
            "acceptance_histogram": hist, "num_spec_steps": n, "num_accepted_draft_tokens": acc,
            "num_draft_tokens": n * k, "num_spec_tokens": k,
            "per_step_accepted": per_step, "per_step_drafted": [k] * n}


def responses() -> list[dict]:
    """A completion, a chat completion, and the bare metrics object (offline `LLM.generate`)."""
    a, b, c = (spec(s) for s in STEPS)
    return [{"id": "cmpl-0", "object": "text_completion", "choices": [{"text": "x"}],
             "metrics": {"speculative_decoding": a}},
            {"id": "chatcmpl-1", "object": "chat.completion",
             "choices": [{"message": {"role": "assistant", "content": "y"}}],
             "metrics": {"speculative_decoding": b}},
            c]


# by hand: pooled histogram [3, 3, 1, 1, 1] over 9 steps, 12 drafts accepted
TAU = 1 + 12 / 9
PER_POSITION = [6 / 9, 3 / 9, 2 / 9, 1 / 9]          # P(drafts 1..i all accepted), vLLM's convention
PER_REQUEST = [1 + 7 / 4, 1 + 1 / 3, 1 + 4 / 2]


@pytest.mark.parametrize("form", ["jsonl", "list"])
def test_a_responses_file_gives_pooled_tau_per_position_and_each_requests_tau(tmp_path, form):
    f = tmp_path / f"responses.{form}"
    rs = responses()
    f.write_text("".join(json.dumps(r) + "\n" for r in rs) if form == "jsonl" else json.dumps(rs, indent=1))
    o = observed.observe(log=str(f))
    assert o.engine == "vllm" and o.depth == K and o.lines == 3 and str(f) in o.source
    assert o.tau == pytest.approx(TAU) and o.per_position == pytest.approx(PER_POSITION)
    assert o.per_request_tau == pytest.approx(PER_REQUEST) and o.tau_se > 0


def test_a_response_without_per_request_metrics_names_the_file_field_and_flag(tmp_path):
    f = tmp_path / "plain.jsonl"
    f.write_text(json.dumps(responses()[0]) + "\n" + json.dumps({"id": "cmpl-2", "choices": []}) + "\n")
    with pytest.raises(ValueError, match=r"plain\.jsonl.*metrics\.speculative_decoding is missing.*"
                                         r"--per-request-spec-decode-metrics"):
        observed.observe(log=str(f))
    g = tmp_path / "other.json"
    g.write_text(json.dumps({"model": "m", "usage": {}}))
    with pytest.raises(ValueError, match=r"other\.json.*metrics\.speculative_decoding"):
        observed.observe(log=str(g))


def test_text_that_is_not_json_stays_a_log(tmp_path):
    """SGLang's lines start with '[' (a timestamp) but do not parse: a log; a cut-off JSON file is
    read as a log too, and holds no acceptance line."""
    f = tmp_path / "sglang.log"
    f.write_text("[2026-11-30 08:00:00] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, "
                 "accept len: 1.05, accept rate: 0.21, cuda graph: True, gen throughput (token/s): 50.1\n")
    assert observed.observe(log=str(f)).engine == "sglang"
    g = tmp_path / "cut.json"
    g.write_text('{"metrics": {"speculative_decoding": {"acceptance_his')
    with pytest.raises(ValueError, match="no vLLM"):
        observed.observe(log=str(g))


def test_the_doctor_reports_the_observed_tau_and_the_per_request_line(tmp_path):
    """`eagle-nb doctor --static-only --observed responses.jsonl` on the code pair: the observed τ
    at the stated depth and one line of each request's τ; the JSON (schema 7) carries the list."""
    f = tmp_path / "responses.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in responses()))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-m", "eagle_nb", "doctor", "--drafter", str(CODE_DRAFTER_SPECULATORS),
                        "--target", str(CODE_TARGET), "--static-only", "--observed", str(f)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    assert f"OBSERVED (vllm responses {f}): tau 2.33 at depth 4, per-position 0.67 / 0.33 / 0.22 / 0.11" in p.stdout
    assert "per-request tau: median 2.75, range 1.33-3.00 over 3 requests" in p.stdout, p.stdout
    j = json.loads(doctor(CODE_DRAFTER_SPECULATORS, CODE_TARGET, observed_log=str(f), dynamic=False).to_json())
    assert j["schema_version"] == diagnosis.SCHEMA_VERSION == 7
    assert j["observation"]["per_request_tau"] == pytest.approx(PER_REQUEST)
