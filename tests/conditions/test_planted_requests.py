"""A planted workload (conditions.workload_summary.planted_requests) written as a prompt file
(io.prompts.write_prompt_rows) and read back: sent raw to a templated target, between ChatML
markers to one without, each named by the condition the doctor's workload phase chooses for it."""
from __future__ import annotations

import pytest

from eagle_nb.conditions.templates import CHATML
from eagle_nb.conditions.workload_summary import MISMATCH, RAW, form_of, planted_requests
from eagle_nb.io.prompts import Chat, read_prompt_rows, write_prompt_rows


def test_planted_rows_round_trip_and_name_their_condition(tmp_path):
    prompts = [Chat.user("What is 2 + 2?"), "def f(x):"]
    rows, cond = planted_requests(prompts, "chatml")
    assert cond == RAW and [r["prompt"] for r in rows] == ["What is 2 + 2?", "def f(x):"]
    back = read_prompt_rows(write_prompt_rows(tmp_path / "raw.jsonl", rows))
    assert [form_of(r["prompt"]) for r in back] == ["raw", "raw"]
    rows, cond = planted_requests(prompts, "none")
    assert cond == MISMATCH and rows[1]["prompt"] == CHATML.format(text="def f(x):")
    back = read_prompt_rows(write_prompt_rows(tmp_path / "chatml.jsonl", rows))
    assert [form_of(r["prompt"]) for r in back] == ["rendered", "rendered"]
    chats = read_prompt_rows(write_prompt_rows(tmp_path / "chats.jsonl", [{"prompt": prompts[0], "language": "en"}]))
    assert chats == [{"prompt": prompts[0], "language": "en"}]
    with pytest.raises(ValueError, match="must be known"):
        planted_requests(prompts, "unknown")
