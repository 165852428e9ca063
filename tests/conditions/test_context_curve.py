"""The tau-versus-context curve (conditions/context_curve.py) on the code pair: prompts cut to the
requested lengths, lengths past the target's context clipped and replaced by the longest that
fits, each point a one-pass run; chat prompts on the real tokenizer when it is set up."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from eagle_nb.conditions.context_curve import context_curve, long_prompts
from eagle_nb.io.paths import REAL_TARGET
from eagle_nb.io.prompts import Chat
from eagle_nb.model.limits import encode
from helpers import code_pair


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def test_prompts_are_cut_to_the_requested_length(pair):
    """Raw source prompts (the code tokenizer has no template): each feeds the requested number of
    ids or at most 2 fewer, one per document, different documents."""
    got = long_prompts(pair.tokenizer, (128, 700), n_docs=2)
    for L, rows in got.items():
        assert len(rows) == 2 and rows[0][0] != rows[1][0]
        for prompt, n in rows:
            assert isinstance(prompt, str) and n == encode(pair.tokenizer, prompt).shape[-1]
            assert L - 2 <= n <= L


@pytest.mark.skipif(not (REAL_TARGET / "tokenizer.json").exists(), reason="real target not set up")
def test_chat_prompts_on_a_templated_tokenizer():
    """With a chat template the prompts are Chats of documentation prose plus the instruction,
    rendered to the requested length."""
    tok = AutoTokenizer.from_pretrained(str(REAL_TARGET))
    (prompt, n), = long_prompts(tok, (512,))[512]
    assert isinstance(prompt, Chat) and prompt.text.endswith("in three sentences.")
    assert 510 <= n <= 512 and n == encode(tok, prompt).shape[-1]


def test_curve_clips_to_the_target_context(pair):
    """Lengths 128 and 2048 on a 1024-token target with 8 new tokens at depth 3: 2048 is clipped
    and replaced by the longest prompt that fits (1013); each point is a one-pass run of its
    prompts with a tau in [1, 4]; the static check passes (same context and RoPE)."""
    c = context_curve(pair, lengths=(128, 2048), depth=3, max_new_tokens=8)
    assert [p.length for p in c.points] == [128, 1013] and c.clipped == [2048]
    assert c.target_context == 1024 and c.drafter_context == 1024 and c.check.status == "ok"
    for p in c.points:
        assert 1 <= p.tau <= 4 and p.result.computed_by == "one-pass" and p.seconds > 0
        assert p.prompt_tokens[0] <= p.length
    text = "\n".join(c.report_lines())
    assert "clipped (past the target's context 1024 with 8 new tokens): [2048]" in text
    assert c.as_dict()["points"][0]["length"] == 128
