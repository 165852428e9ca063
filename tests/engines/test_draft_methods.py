"""How the kit asks an engine to draft at T > 0 and how many requests it keeps in flight, without
an engine: the entry's draft-sampling settings map to the kit's verify rules, a launched vLLM is
given the setting in its speculative config, and the request pool honours `concurrency`."""
from __future__ import annotations

import json
import threading
import time

import pytest

from eagle_nb.engines import registry
from eagle_nb.engines.comparison import draft_method
from eagle_nb.engines.endpoint import Endpoint
from eagle_nb.engines.engine_run import run_on_engine
from eagle_nb.engines.vllm import vllm_command
from eagle_nb.model.config import ARGMAX, SAMPLED


def test_vllm_draft_methods_map_to_the_kits_rules():
    """vLLM's default ('greedy', first) is the argmax rule, 'probabilistic' the sampled one; an
    unknown setting and a setting for an engine without one are refused by name."""
    v, llama = registry.entry("vllm"), registry.entry("llama.cpp")
    assert draft_method(v, None) == ("greedy", ARGMAX)
    assert draft_method(v, "probabilistic") == ("probabilistic", SAMPLED)
    with pytest.raises(ValueError, match=r"'nucleus'.*\['greedy', 'probabilistic'\]"):
        draft_method(v, "nucleus")
    assert draft_method(llama, None) == (None, None)
    with pytest.raises(ValueError, match="takes no draft_sample_method"):
        draft_method(llama, "greedy")


def test_vllm_command_carries_the_draft_sample_method():
    def spec(cmd):
        return json.loads(cmd[cmd.index("--speculative-config") + 1])
    base = dict(dtype="float32")
    plain = spec(vllm_command("py", "T", "D", 4, 8000, **base))
    assert "draft_sample_method" not in plain and plain["num_speculative_tokens"] == 4
    asked = spec(vllm_command("py", "T", "D", 4, 8000, draft_sample_method="probabilistic", **base))
    assert asked == {**plain, "draft_sample_method": "probabilistic"}
    off = vllm_command("py", "T", "D", 0, 8000, **base)      # the baseline: vLLM refuses the metrics flag there
    assert "--speculative-config" not in off and "--per-request-spec-decode-metrics" not in off


@pytest.mark.parametrize("concurrency, most", [(1, 1), (3, 3), (None, 6)])
def test_requests_in_flight_follow_concurrency(monkeypatch, concurrency, most):
    """Six prompts: at most `concurrency` requests are open at once (default: all of them, up to
    16), and every answer comes back in prompt order."""
    import eagle_nb.engines.endpoint as E
    lock, now, peak = threading.Lock(), [0], [0]

    def post(url, body):
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.05)
        with lock:
            now[0] -= 1
        return {"choices": [{"token_ids": [body["prompt"][0][0]]}], "metrics": None}
    monkeypatch.setattr(E, "http_post_json", post)
    out, _ = Endpoint("http://x", model="m").complete_each([[i] for i in range(6)], 4, concurrency=concurrency)
    assert out == [[i] for i in range(6)] and peak[0] == most
    with pytest.raises(ValueError, match="concurrency 0"):
        Endpoint("http://x", model="m").complete_each([[1]], 4, concurrency=0)


def test_concurrency_is_refused_for_an_engine_that_sends_one_at_a_time():
    with pytest.raises(ValueError, match="one at a time"):
        run_on_engine("llama.cpp", [[1]], max_new_tokens=4, temperature=0.0, seed=0,
                      url="http://127.0.0.1:9", concurrency=4)


def test_near_greedy_probe_counts_outputs_equal_to_greedy():
    """The probe sends the prompts at T = 0.01 and counts outputs equal to greedy over greedy's
    length; below half, its verdict says the engine's sampled path is broken, naming the counts."""
    from types import SimpleNamespace

    from eagle_nb.engines import sampling_probe as SP
    greedy = [[1, 2, 3], [4, 5], [6], [7, 8]]
    sent = []

    def engine(outputs):
        def complete(url, ids, n, t, seed):
            sent.append(t)
            return outputs, None
        return SimpleNamespace(complete=complete)
    ok = SP.near_greedy(engine([[1, 2, 3, 9], [4, 5], [6], [7, 0]]), "u", [[0]] * 4, greedy, 8, 3)
    assert ok == {"temperature": SP.NEAR_GREEDY_T, "identical": 3, "prompts": 4, "ok": True}
    bad = SP.near_greedy(engine([[1, 9], None, [0], [7, 8]]), "u", [[0]] * 4, greedy, 8, 3)
    assert bad["identical"] == 1 and not bad["ok"] and sent == [SP.NEAR_GREEDY_T] * 2
    assert "1 of 4 prompts" in SP.verdict(bad, "vLLM") and "compare at T = 0" in SP.verdict(bad, "vLLM")
