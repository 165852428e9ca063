"""A raw prompt sent to a target with a chat template is named raw in the result (a serving
condition), never silently templated or silently left raw."""
from types import SimpleNamespace

from eagle_nb.io.prompts import Chat, raw_note
from helpers import code_pair, code_prompts


def test_raw_prompts_are_named_only_when_the_target_has_a_template():
    chat = Chat.from_dicts([{"role": "user", "content": "hi"}], "test")
    templated = SimpleNamespace(chat_template="{{ messages }}")
    note = raw_note(["a", chat, "b"], templated)
    assert note.startswith("2 of 3 prompts are raw") and "--chat" in note
    assert raw_note([chat], templated) is None
    assert raw_note(["a"], SimpleNamespace(chat_template=None)) is None


def test_a_pairs_result_carries_the_note(monkeypatch):
    """The code pair's tokenizer has no template (no note); given one, the result names the raw
    prompts in its notes (and so in `speculate`'s text and JSON)."""
    pair = code_pair()
    prompts = code_prompts(1)
    assert not any("are raw" in n for n in pair.run(prompts, depth=2, max_new_tokens=4).notes)
    monkeypatch.setattr(pair.tokenizer, "chat_template", "{{ messages }}", raising=False)
    res = pair.run(prompts, depth=3, max_new_tokens=4)
    assert any(n.startswith("1 of 1 prompts are raw") for n in res.notes), res.notes
