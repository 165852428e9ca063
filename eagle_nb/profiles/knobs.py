"""The engines' synthetic-acceptance knobs from a speculation profile: what makes vLLM, SGLang or
TensorRT-LLM accept drafts as this drafter would, without running it (for capacity and latency
studies). Each engine wants another convention (docs/profile.md cites the sources):

- vLLM (0.32, `vllm/config/speculative.py`): `speculative_config` with
  `rejection_sample_method="synthetic"` and `synthetic_acceptance_rates`, the **marginal** rates,
  one per draft position (`num_speculative_tokens` entries, each in [0, 1], non-increasing); the
  sampler turns them into conditional ones itself (`unconditional_to_conditional_rates`).
- SGLang (`python/sglang/srt/environ.py`, `speculative/spec_utils.py`):
  `SGLANG_SIMULATE_ACC_LEN` = the mean acceptance length **with** the bonus token, clamped to
  [1, num_steps + 1], and `SGLANG_SIMULATE_ACC_METHOD=match-expected` (each step draws the floor
  or the ceiling so the mean is exact; one length per batch step, so the curve's shape is lost).
- TensorRT-LLM (`tensorrt_llm/_torch/speculative/interface.py`):
  `TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS` = accepted **drafts** per step, AL - 1 (the
  one-model path takes a fraction as the probability of one more; the two-model path an integer).

`KNOBS` is the table (engine -> settings function); `render` writes the shell lines.
Knows the profile; nothing about processes.
"""
from __future__ import annotations

import json

from eagle_nb.profiles.profile import ProfileError, SpeculationProfile


def _depth(p: SpeculationProfile, k: int | None) -> int:
    k = p.num_speculative_tokens if k is None else k
    if not isinstance(k, int) or k < 1:
        raise ProfileError(f"num_speculative_tokens must be a positive integer, got {k!r}")
    if k > p.num_speculative_tokens:
        raise ProfileError(f"num_speculative_tokens {k} is deeper than the profile's "
                           f"{p.num_speculative_tokens}: its rates say nothing about positions past "
                           f"{p.num_speculative_tokens} (measure at depth {k})")
    return k


def vllm_settings(p: SpeculationProfile, k: int | None = None, model: str | None = None) -> dict:
    """vLLM's `speculative_config` (the `--speculative-config` JSON), checked as vLLM checks it;
    `model` is the drafter's path (a DRAFTER placeholder when not given)."""
    k = _depth(p, k)
    rates = [round(x, 6) for x in p.marginal_accept_rates[:k]]
    if any(rates[i] > rates[i - 1] for i in range(1, k)):
        raise ProfileError(f"synthetic_acceptance_rates must be non-increasing, got {rates}")
    cfg = {"method": p.method if p.method in ("eagle3", "eagle") else "eagle3",
           "model": model or "DRAFTER", "num_speculative_tokens": k,
           "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": rates}
    return {"speculative_config": cfg}


def sglang_settings(p: SpeculationProfile, k: int | None = None) -> dict:
    """SGLang's environment (simulated acceptance length) and its chain flags at depth k."""
    k = _depth(p, k)
    return {"env": {"SGLANG_SIMULATE_ACC_LEN": f"{p.tokens_per_step(k):.4f}",
                    "SGLANG_SIMULATE_ACC_METHOD": "match-expected"},
            "flags": {"--speculative-num-steps": k, "--speculative-eagle-topk": 1,
                      "--speculative-num-draft-tokens": k + 1}}


def trtllm_settings(p: SpeculationProfile, k: int | None = None) -> dict:
    """TensorRT-LLM's forced accepted-draft count (AL - 1) and its speculative_config at depth k."""
    k = _depth(p, k)
    forced = p.tokens_per_step(k) - 1
    return {"env": {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": f"{forced:.4f}"},
            "two_model_integer": round(forced),
            "speculative_config": {"decoding_type": "Eagle3", "max_draft_len": k}}


KNOBS = {"vllm": vllm_settings, "sglang": sglang_settings, "trtllm": trtllm_settings}


def settings(engine: str, p: SpeculationProfile, k: int | None = None, **kw) -> dict:
    if engine not in KNOBS:
        raise ProfileError(f"unknown engine {engine!r}; choose from {', '.join(KNOBS)}")
    return KNOBS[engine](p, k, **kw)


def render(engine: str, s: dict) -> str:
    """The settings as the lines a user pastes (flags, environment, config)."""
    if engine == "vllm":
        cfg = json.dumps(s["speculative_config"])
        return (f"# vLLM: synthetic rejection sampling with the profile's marginal rates\n"
                f"vllm serve TARGET --speculative-config '{cfg}'\n"
                f"# Python: LLM(model=TARGET, speculative_config={cfg})")
    env = " ".join(f"{k}={v}" for k, v in s["env"].items())
    if engine == "sglang":
        flags = " ".join(f"{k} {v}" for k, v in s["flags"].items())
        return (f"# SGLang: simulated mean acceptance length (bonus token included)\n"
                f"{env} python -m sglang.launch_server --model-path TARGET "
                f"--speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFTER {flags}")
    return (f"# TensorRT-LLM: forced accepted drafts per step (AL - 1; the two-model path reads an "
            f"integer: {s['two_model_integer']})\n"
            f"{env} trtllm-serve TARGET --extra_llm_api_options extra.yaml\n"
            f"# extra.yaml: speculative_config: {json.dumps(s['speculative_config'])} "
            "(plus speculative_model: DRAFTER)")
