"""The engines' synthetic-acceptance knobs from a profile (their registry entries, read through
eagle_nb/engines/knobs.py; the quantities from eagle_nb/profiles/knobs.py): vLLM gets the
marginal rates, SGLang the mean acceptance length with the bonus, TensorRT-LLM the accepted drafts
(AL - 1), each at any depth up to the profile's and never past it. The slow test hands the vLLM
config to vLLM 0.32's own validator (engine environment)."""
from __future__ import annotations

import json
import subprocess

import pytest

from eagle_nb.engines.knobs import draft_flags, flags_line, names, render, settings
from eagle_nb.profiles.profile import ProfileError, SpeculationProfile


def _profile():
    # 100 steps at k = 4 accepting 0..4 drafts: marginal 0.8, 0.55, 0.3, 0.1; AL 2.75
    return SpeculationProfile.from_histogram([20, 25, 25, 20, 10], 4)


def test_vllm_gets_the_marginal_rates():
    s = settings("vllm", _profile(), drafter="/d")["speculative_config"]
    assert s == {"method": "eagle3", "model": "/d", "num_speculative_tokens": 4,
                 "rejection_sample_method": "synthetic",
                 "synthetic_acceptance_rates": [0.8, 0.55, 0.3, 0.1]}
    short = settings("vllm", _profile(), 2)["speculative_config"]
    assert short["num_speculative_tokens"] == 2
    assert short["synthetic_acceptance_rates"] == [0.8, 0.55]       # a chain's prefix


def test_sglang_gets_the_acceptance_length_with_the_bonus():
    s = settings("sglang", _profile())
    assert s["env"] == {"SGLANG_SIMULATE_ACC_LEN": "2.7500", "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}
    assert s["flags"] == {"--speculative-num-steps": 4, "--speculative-eagle-topk": 1,
                          "--speculative-num-draft-tokens": 5}
    assert settings("sglang", _profile(), 1)["env"]["SGLANG_SIMULATE_ACC_LEN"] == "1.8000"


def test_trtllm_gets_the_accepted_drafts():
    s = settings("trtllm", _profile())
    assert s["env"] == {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": "1.7500"}
    assert s["two_model_integer"] == 2 and s["speculative_config"]["max_draft_len"] == 4


def test_knobs_refuse_depths_past_the_profile():
    """A profile measured at k = 4 says nothing about position 5: num_speculative_tokens is named."""
    for engine in names():
        with pytest.raises(ProfileError, match="num_speculative_tokens 6 is deeper than the profile's 4"):
            settings(engine, _profile(), 6)
    with pytest.raises(ProfileError, match="unknown engine"):
        settings("tgi", _profile())


def test_render_writes_paste_ready_lines():
    for engine in names():
        text = render(engine, settings(engine, _profile()))
        assert text.startswith("#") and "TARGET" in text
    vllm = render("vllm", settings("vllm", _profile()))
    cfg = json.loads(vllm.split("--speculative-config '")[1].split("'")[0])
    assert cfg["synthetic_acceptance_rates"] == [0.8, 0.55, 0.3, 0.1]


def test_chain_flags_for_tune_come_from_the_entries():
    """`eagle-nb tune`'s flags for the best k: vLLM's num_speculative_tokens and SGLang's chain
    flags (TensorRT-LLM has knobs only, no chain flags); k = 0 says speculation is off."""
    assert names() == ["vllm", "sglang", "trtllm"]
    assert draft_flags(3) == {"vllm": {"num_speculative_tokens": 3},
                              "sglang": {"--speculative-num-steps": 3, "--speculative-eagle-topk": 1,
                                         "--speculative-num-draft-tokens": 4}}
    assert draft_flags(0)["vllm"].startswith("no speculative_config")
    assert flags_line(0) == "no speculation (no speculative_config (speculation does not pay))"
    assert flags_line(2) == ("k = 2; vLLM num_speculative_tokens=2; SGLang --speculative-num-steps 2 "
                             "--speculative-eagle-topk 1 --speculative-num-draft-tokens 3")


@pytest.mark.slow
def test_vllm_validates_the_config():
    """vLLM 0.32's own check (`SpeculativeConfig._resolve_synthetic_acceptance_rates`) accepts the
    printed rates, and its conversion to the sampler's conditional rates equals the profile's."""
    from eagle_nb.engines.server import EngineError, engine_python
    try:
        python = engine_python()
    except EngineError as e:
        pytest.skip(str(e))
    p = _profile()
    rates = settings("vllm", p)["speculative_config"]["synthetic_acceptance_rates"]
    code = ("import json, sys\nfrom vllm.config.speculative import SpeculativeConfig as S\n"
            "from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates as u\n"
            "r = json.loads(sys.argv[1])\n"
            "print(json.dumps(u(S._resolve_synthetic_acceptance_rates(len(r), r, None))))")
    out = subprocess.run([str(python), "-c", code, json.dumps(rates)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == pytest.approx(p.conditional_accept_rates,
                                                                            abs=1e-6)
