"""TensorRT-LLM as an engine entry with only what the kit knows of it: its forced-acceptance knob.
The kit neither launches it nor reads its logs or `/metrics`; it writes the settings that make it
accept drafts as a profile says (`tensorrt_llm/_torch/speculative/interface.py`):
`TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS` = accepted **drafts** per step, AL - 1 (the one-model
path takes a fraction as the probability of one more; the two-model path an integer), with an
EAGLE-3 `speculative_config` of `max_draft_len` k. Knows its knob; nothing else.
"""
from __future__ import annotations

import json

from eagle_nb.engines.entry import Engine
from eagle_nb.profiles import knobs as K

NAME = "trtllm"


def knobs(p, k: int | None = None, drafter: str | None = None) -> dict:
    """Its forced accepted-draft count (AL - 1) and its speculative_config at depth k."""
    k = K.depth(p, k)
    forced = K.accepted_drafts(p, k)
    return {"env": {"TLLM_SPEC_DECODE_FORCE_NUM_ACCEPTED_TOKENS": f"{forced:.4f}"},
            "two_model_integer": round(forced),
            "speculative_config": {"decoding_type": "Eagle3", "max_draft_len": k}}


def render_knobs(s: dict) -> str:
    env = " ".join(f"{k}={v}" for k, v in s["env"].items())
    return (f"# TensorRT-LLM: forced accepted drafts per step (AL - 1; the two-model path reads an "
            f"integer: {s['two_model_integer']})\n"
            f"{env} trtllm-serve TARGET --extra_llm_api_options extra.yaml\n"
            f"# extra.yaml: speculative_config: {json.dumps(s['speculative_config'])} "
            "(plus speculative_model: DRAFTER)")


ENTRY = Engine(NAME, "TensorRT-LLM", knobs=knobs, render_knobs=render_knobs)
