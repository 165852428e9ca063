"""The serving modes of a chat request (eagle_nb.conditions.templates) on a tokenizer with a real chat
template (SmolLM2-135M-Instruct's ChatML, skipped when absent) and on one without (the code
pair's): each mode's text and ids, and the refusals."""
from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from eagle_nb.io.paths import CODE_TARGET, REAL_TARGET
from eagle_nb.io.prompts import Chat
from eagle_nb.model.limits import ChatTemplateError, encode
from eagle_nb.conditions.registry import BY_NAME
from eagle_nb.conditions.templates import AS_TEXT, CHATML, TEMPLATE_MODES, encode_mode, render_mode

needs_real = pytest.mark.skipif(not (REAL_TARGET / "tokenizer.json").exists(),
                                reason=f"the real target's tokenizer is not set up ({REAL_TARGET})")
CHAT = Chat.user("Write a haiku about tea.")
SMOL_DEFAULT = "You are a helpful AI assistant named SmolLM"


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(REAL_TARGET))


@needs_real
def test_chat_mode_is_what_the_loop_encodes_and_raw_is_the_user_text(tok):
    """`chat` gives limits.encode's ids for the Chat; `raw` gives the user text, encoded as raw text
    (the tokenizer's own special tokens, none for SmolLM2)."""
    assert encode_mode(tok, CHAT, "chat").tolist() == encode(tok, CHAT).tolist()
    assert render_mode(tok, CHAT, "raw") == "Write a haiku about tea."
    assert encode_mode(tok, CHAT, "raw").tolist() == encode(tok, CHAT.text).tolist()
    assert encode_mode(tok, "Write a haiku about tea.", "chat").tolist() == encode(tok, CHAT).tolist()


@needs_real
def test_no_generation_prompt_drops_only_the_assistant_prefix(tok):
    """The ids without the generation prompt are a prefix of the chat ids; what is left is the
    assistant's opening, `<|im_start|>assistant\\n`."""
    full = encode_mode(tok, CHAT, "chat")[0].tolist()
    bare = encode_mode(tok, CHAT, "no-generation-prompt")[0].tolist()
    assert full[:len(bare)] == bare and tok.decode(full[len(bare):]) == "<|im_start|>assistant\n"


@needs_real
def test_system_prompt_added_or_removed(tok):
    """`system-added` puts the given system turn in place of the template's default (and of one the
    chat has); `system-removed` drops the chat's own, so SmolLM2's template inserts its default."""
    added = render_mode(tok, CHAT, "system-added", system="Answer in French.")
    assert "<|im_start|>system\nAnswer in French.<|im_end|>" in added and SMOL_DEFAULT not in added
    with_sys = Chat.user("Hi", system="Be terse.")
    assert "Be terse." not in render_mode(tok, with_sys, "system-added")
    removed = render_mode(tok, with_sys, "system-removed")
    assert "Be terse." not in removed and SMOL_DEFAULT in removed
    assert render_mode(tok, with_sys, "chat") != removed


def test_modes_needing_a_template_refuse_a_tokenizer_without_one():
    """The code target's tokenizer has no chat template: `raw` and `chatml` (the kit's own ChatML
    markers around the user text, tokenised as text) work, every other mode raises
    ChatTemplateError naming the missing template; an unknown mode names the known ones."""
    plain = AutoTokenizer.from_pretrained(str(CODE_TARGET))
    assert encode_mode(plain, CHAT, "raw").shape[-1] > 0
    assert render_mode(plain, CHAT, "chatml") == CHATML.format(text=CHAT.text)
    assert encode_mode(plain, CHAT, "chatml").shape[-1] > encode_mode(plain, CHAT, "raw").shape[-1]
    for mode in TEMPLATE_MODES:
        if mode not in AS_TEXT:
            with pytest.raises(ChatTemplateError, match="no chat"):
                render_mode(plain, CHAT, mode)
    with pytest.raises(ValueError, match="system-added"):
        render_mode(plain, CHAT, "completion")
    with pytest.raises(TypeError, match="Chat or a non-empty string"):
        render_mode(plain, "", "raw")


def test_every_mode_names_its_condition_and_cites_a_report():
    """Each non-healthy mode serves a template condition of the registry and its docstring cites a
    public report (project#number) or the doc that explains it."""
    for mode, (fn, condition) in TEMPLATE_MODES.items():
        if mode == "chat":
            assert condition is None
            continue
        assert BY_NAME[condition].family == "template" and ("#" in fn.__doc__ or "docs/" in fn.__doc__), mode
