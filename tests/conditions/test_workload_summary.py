"""The workload summary (eagle_nb/conditions/workload_summary.py), pure: requests in, data out.
How each request was sent and the healthy form it is measured in, the conditions a workload makes
worth measuring, the context it needs against both limits (requests that do not fit the target
named), the seeded sample of a large workload, coverage per language and loop share from a run's
statistics; and ChatML text parsed back into the chat it renders (templates.parse_chatml)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from eagle_nb.conditions import workload_summary as W
from eagle_nb.conditions.templates import CHATML, parse_chatml
from eagle_nb.io.paths import REAL_TARGET
from eagle_nb.io.prompts import Chat

PLAIN = "def add(a, b):"
RENDERED = CHATML.format(text="Sort a list")                               # with the assistant prefix
NO_PREFIX = "<|im_start|>system\nBe brief<|im_end|>\n<|im_start|>user\nName a fruit<|im_end|>\n"
BROKEN = "see <|im_start|> in the middle of text"
CFG = dict(target_cfg={"max_position_embeddings": 1024}, drafter_cfg={"max_position_embeddings": 256})


def test_parse_chatml_reads_whole_renderings_only():
    """A whole ChatML rendering gives its chat and whether it ends with the generation prefix;
    text with a stray marker, an unknown role or an assistant last turn gives (None, False)."""
    assert parse_chatml(RENDERED) == (Chat.user("Sort a list"), True)
    assert parse_chatml(NO_PREFIX) == (Chat((("system", "Be brief"), ("user", "Name a fruit"))), False)
    for bad in (BROKEN, PLAIN, "<|im_start|>tool\nx<|im_end|>\n",
                "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n",
                "<|im_start|>user\nhi<|im_end|>\ntrailing text"):
        assert parse_chatml(bad) == (None, False), bad


def test_a_mixed_workload_is_summarised_with_a_named_warning():
    """Chat, raw, rendered (with and without the prefix) and unparsed requests together: each is
    counted in its form, a MixedWorkloadWarning names the mix, the raw request is measured as a
    chat and the rendered ones as the chats they render (on a ChatML target), and the two template
    conditions they point at are chosen, each saying which arm is what was sent."""
    prompts = [Chat.user("Hi"), PLAIN, RENDERED, NO_PREFIX, BROKEN]
    with pytest.warns(W.MixedWorkloadWarning, match="1 chat and 4 raw requests"):
        w, keep, healthy = W.summarize(prompts, "chatml", requests=5, source="t")
    assert w.forms == {"chat": 1, "raw": 1, "rendered": 1, "rendered-no-generation-prompt": 1,
                       "rendered-unparsed": 1}
    assert w.system_turns == 1 and keep == [0, 1, 2, 3, 4]
    assert healthy == [Chat.user("Hi"), Chat.user(PLAIN), Chat.user("Sort a list"), parse_chatml(NO_PREFIX)[0], BROKEN]
    assert set(w.conditions) == {"template-raw", "template-no-generation-prompt"}
    assert "as sent: template-no-generation-prompt" in w.conditions["template-no-generation-prompt"]
    assert any("mixed workload" in x for x in w.warnings) and any("not a whole ChatML" in x for x in w.warnings)
    assert "template use: 1 chat, 1 raw, 1 rendered" in "\n".join(w.lines())


def test_the_template_decides_the_healthy_form_and_the_condition():
    """On a target without a template, raw text is healthy as it is (no condition), ChatML text is
    measured as the user's text and between ChatML markers (chat-template-mismatch); on one with
    another template the chat is rendered in it; an unknown template chooses nothing."""
    w, _, healthy = W.summarize([PLAIN, PLAIN], "none", requests=2, source="t")
    assert healthy == [PLAIN, PLAIN] and w.conditions == {}
    w, _, healthy = W.summarize([RENDERED], "none", requests=1, source="t")
    assert healthy == ["Sort a list"] and list(w.conditions) == ["chat-template-mismatch"]
    w, _, healthy = W.summarize([RENDERED], "other", requests=1, source="t")
    assert healthy == [Chat.user("Sort a list")] and list(w.conditions) == ["chat-template-mismatch"]
    w, _, healthy = W.summarize([PLAIN, RENDERED], "unknown", requests=2, source="t")
    assert healthy == [PLAIN, RENDERED] and w.conditions == {}
    with pytest.raises(ValueError, match="template must be one of"):
        W.summarize([PLAIN], "chat-ml", requests=1, source="t")


def test_context_lengths_against_both_limits():
    """With 64 new tokens and depth 4: a request past the target's 1,024 positions is named by its
    request number and left out; one past the drafter's 256 but inside the target's makes
    context-past-training worth measuring; when nothing fits, a ValueError says so."""
    w, keep, healthy = W.summarize([PLAIN] * 3, "none", requests=40, source="t", numbers=[3, 17, 40],
                                   lengths=[50, 300, 990], new_tokens=64, depth=4, **CFG)
    assert keep == [0, 1] and len(healthy) == 2 and w.measured == 2
    assert w.past_target == [(40, 990)] and (w.target_limit, w.drafter_limit) == (1024, 256)
    assert "1 of 2 measured requests need more than the drafter's 256" in w.conditions["context-past-training"]
    text = "\n".join(w.lines())
    assert "request 40 (990 tokens" in text and "less 1 that do not fit the target" in text
    assert any("2 of 3 requests are longer than the drafter's 256" in f for f in w.context["findings"])
    w, keep, _ = W.summarize([PLAIN], "none", requests=1, source="t", lengths=[100], **CFG)
    assert keep == [0] and w.conditions == {} and w.past_target == []
    with pytest.raises(ValueError, match="none of the 1 sampled requests fits"):
        W.summarize([PLAIN], "none", requests=1, source="t", lengths=[1000], **CFG)


def test_a_large_workload_is_sampled_the_same_way_each_time():
    """100,000 requests: SAMPLE distinct indices in file order, the same on every call; a workload
    no larger than n is taken whole; n < 1 is refused."""
    a = W.sample_indices(100_000, None)
    assert len(a) == W.SAMPLE == len(set(a)) and a == sorted(a) and a == W.sample_indices(100_000, None)
    assert a[-1] > 50_000                     # spread over the file, not its head
    assert W.sample_indices(10, 64) == list(range(10)) and len(W.sample_indices(10, 3)) == 3
    with pytest.raises(ValueError, match=">= 1"):
        W.sample_indices(10, 0)


def test_coverage_per_language_and_loop_share_come_from_the_run():
    """add_run on two continuations (Italian with token 9 outside a vocabulary of ids 0..7, English
    repeating a 6-gram): coverage per language and the pooled loop share, and the report says
    they were measured."""
    w, keep, _ = W.summarize([PLAIN, PLAIN], "none", requests=2, source="t",
                             labels=[{"language": "it"}, {"language": "en"}])
    inside = torch.zeros(10, dtype=torch.bool)
    inside[:8] = True
    stats = [SimpleNamespace(tokens=[1, 9, 2, 9], accept_counts=[0, 0, 1]),
             SimpleNamespace(tokens=[1, 2, 3, 4, 5, 6] * 3, accept_counts=[3, 3, 3, 3])]
    w.add_run(stats, inside, keep)
    groups = w.coverage["groups"]["language"]
    assert groups["it"]["outside_share"] == 0.5 and groups["en"]["outside_share"] == 0
    assert w.loops["loop_tokens"] == 7 and w.loops["tokens"] == 22      # indices 11..17 repeat a 6-gram
    text = "\n".join(w.lines())
    assert "2 of 2 requests measured" in text and "language=it: 50.00% outside" in text
    assert "loop share" in text and w.as_dict()["coverage"]["outside"] == 2


@pytest.mark.skipif(not (REAL_TARGET / "tokenizer.json").exists(), reason="the real target's tokenizer is not set up")
def test_smollm2_renderings_parse_back_to_their_chats():
    """SmolLM2-135M-Instruct's template is ChatML: its rendering of a chat (with its default system
    turn) parses back to that chat, with or without the generation prefix, and renders the same."""
    from transformers import AutoTokenizer

    from eagle_nb.conditions.templates import template_kind
    from eagle_nb.model.limits import render_chat
    tok = AutoTokenizer.from_pretrained(str(REAL_TARGET))
    assert template_kind(tok) == "chatml"
    text = render_chat(tok, Chat.user("Write a haiku about tea."))
    chat, prefix = parse_chatml(text)
    assert prefix and chat.text == "Write a haiku about tea." and chat.messages[0][0] == "system"
    assert render_chat(tok, chat) == text
    assert parse_chatml(render_chat(tok, chat, generation_prompt=False)) == (chat, False)
