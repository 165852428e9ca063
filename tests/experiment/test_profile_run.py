"""A profile measured on the code pair (eagle_nb/experiment/profile_run.py): by the one pass at
T = 0, the live loop at T > 0 and a recording, its rates are the run's own acceptance metrics,
its histogram the run's accept counts, and the measurement conditions say what was measured."""
from __future__ import annotations

import pytest

from eagle_nb.io.paths import CODE_DRAFTER
from eagle_nb.experiment.profile_run import measure_profile, profile_from_result, prompt_template
from eagle_nb.experiment.recorded_pair import RecordedPair
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.prompts import Chat
from eagle_nb.profiles.profile import ProfileError, counts_from_lengths
from eagle_nb.recordings.recording import record
from helpers import code_pair, code_prompts

N, NEW, K = 6, 32, 4


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def test_one_pass_profile_is_the_runs_metrics(pair):
    """T = 0: the rates are vLLM's per-position acceptance and EAGLE's n-alpha of the same run,
    the mean is its tau, the histogram its accept counts, and 1 + sum(marginal) = tau."""
    prompts = code_prompts(N)
    p = measure_profile(pair, prompts, K, max_new_tokens=NEW, prompts_source="code pair")
    res = pair.run(prompts, Setting(depth=K, max_new_tokens=NEW), progress=False)
    m = res.metrics
    assert p.marginal_accept_rates == pytest.approx(m.per_position_acceptance)
    assert p.conditional_accept_rates == pytest.approx([a or 0.0 for a in m.conditional_alpha])
    assert p.mean_accept_length == pytest.approx(m.accept_length)
    assert counts_from_lengths(p.acceptance_length_histogram, K) == m.accept_counts
    assert p.validation()["mean_consistency"]["abs_delta"] < 1e-9
    c = p.measurement_conditions
    assert c["computed_by"] == "one-pass" and c["depth"] == K and c["temperature"] == 0.0
    assert c["num_steps"] == m.verify_steps and c["prompts"]["count"] == N
    assert c["prompts"]["source"] == "code pair"
    assert c["prompts"]["template"].startswith("none")
    per_req = [1 + sum(s.accept_counts) / len(s.accept_counts) for s in res.stats if s.accept_counts]
    assert p.mean_accept_length_per_request == pytest.approx(sum(per_req) / len(per_req))


def test_sampling_profile_comes_from_the_live_loop(pair):
    p = measure_profile(pair, code_prompts(2), 3, max_new_tokens=12, temperature=1.0, seed=3)
    assert p.measurement_conditions["computed_by"] == "live loop"
    assert p.measurement_conditions["temperature"] == 1.0
    assert p.num_speculative_tokens == 3 and sum(p.acceptance_length_histogram.values()) > 0


def test_template_says_how_prompts_reach_the_target():
    """Chat prompts go through the target's chat template; raw text does not; both is named."""
    assert prompt_template([Chat.user("hi")]).startswith("target chat template")
    assert prompt_template(["def f():"]).startswith("none")
    assert prompt_template([Chat.user("hi"), "x"]).startswith("mixed")


def test_recorded_pair_profile_equals_the_loaded_pairs(pair, tmp_path):
    """A recording of the target answers the greedy profile with the same numbers."""
    prompts = code_prompts(3)
    rec = record(pair.target, [pair.encode(p) for p in prompts], tmp_path / "rec", pair.layer_ids,
                 max_new_tokens=16, lookahead=K, eos_token_id=pair.tokenizer.eos_token_id,
                 texts=prompts, progress=False)
    recorded = RecordedPair(rec, CODE_DRAFTER, device="cpu")
    a = measure_profile(pair, prompts, K, max_new_tokens=16)
    b = measure_profile(recorded, prompts, K, max_new_tokens=16)
    assert b.marginal_accept_rates == a.marginal_accept_rates
    assert b.acceptance_length_histogram == a.acceptance_length_histogram
    assert "recording" in b.measurement_conditions["pair"]["target"]


def test_trees_have_no_chain_profile(pair):
    res = pair.run(code_prompts(1), Setting(depth=2, topk=2, max_new_tokens=6), progress=False)
    with pytest.raises(ProfileError, match="topk 2"):
        profile_from_result(res)
