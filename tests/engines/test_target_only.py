"""The target alone in the kit and in llama.cpp (engines/target_only.py): the command line without a
draft model; on the code pair, the kit's target greedy tokens from the cached reference run equal
target-only decoding, and llama-server with no draft model (the target as a float32 GGUF) gives the
kit's greedy tokens; without llama-server the agreement says why instead of raising."""
from __future__ import annotations

import pytest

from eagle_nb.engines import target_agreement
from eagle_nb.engines.llama_cpp import llama_command, llama_unavailable_reason
from eagle_nb.engines.target_only import kit_target_greedy
from helpers import code_pair, code_prompts

REASON = llama_unavailable_reason()


def test_target_only_command_has_no_draft_flags():
    cmd = llama_command("llama-server", "t.gguf", None, 4)
    assert cmd[:3] == ["llama-server", "-m", "t.gguf"]
    assert "-md" not in cmd and not any(c.startswith("--spec") for c in cmd)
    assert "--spec-type" in llama_command("llama-server", "t.gguf", "d.gguf", 4)


def test_kit_greedy_from_the_reference_run_equals_target_only_decoding():
    pair, prompts = code_pair(), code_prompts()[:4]
    assert kit_target_greedy(pair, prompts, 24) == kit_target_greedy(pair, prompts, 24, decode=True)


def test_without_llama_server_the_reason_is_returned(monkeypatch, tmp_path):
    monkeypatch.setenv("ENGINE_VENV", str(tmp_path))
    monkeypatch.delenv("EAGLE_NB_LLAMA_SERVER", raising=False)
    a = target_agreement(code_pair(), code_prompts()[:2], 8)
    assert a["available"] is False and "llama-server" in a["reason"] and a["prompts"] == 2


@pytest.mark.skipif(REASON is not None, reason=f"no llama.cpp: {REASON}")
def test_llama_target_alone_gives_the_kits_greedy_tokens():
    """Code pair, float32 GGUF, 16 prompts x 32 tokens: llama.cpp's target-only greedy tokens are
    the kit's on every prompt but at most one (a float32 tie broken by another kernel)."""
    a = target_agreement(code_pair(), code_prompts(), 32)
    assert a["available"] and a["prompts"] == 16 and a["identical"] >= 15, a["first_divergence"]
    assert a["engine_target"].endswith("target") and len(a["engine"]) == 16
