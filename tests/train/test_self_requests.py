"""The target's own requests (train/self_requests.py): where its turn starts, the filter, the
committed texts read back, and a resumable generation with a stand-in engine."""
import json

import pytest
from transformers import AutoTokenizer

from eagle_nb.io.paths import REAL
from eagle_nb.train import chat_data, self_requests
from eagle_nb.train.self_requests import kept, user_turn_prefix, written_requests


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(str(REAL.target))


def test_prefix_is_where_a_user_turn_starts(tok):
    """A rendered user request begins with the prefix's ids: the target writes exactly where a
    user's text would be, after the default system turn."""
    prefix = user_turn_prefix(tok)
    ids = chat_data.render(tok, [{"role": "user", "content": "How do plants grow?"}])
    assert ids[:len(prefix)] == prefix and len(ids) > len(prefix)
    text = tok.decode(prefix)
    assert text.endswith("<|im_start|>user\n") and "system" in text


def test_filter_drops_open_short_repeated_and_evaluation_like_turns():
    evals = ["Why is the sky blue during the day and red at sunset?"]
    texts = [None, "Hi?", "How do I bake sourdough bread at home?", "how do i bake sourdough bread at home?",
             "Why is the sky blue during the day and red at sunset", "What are good habits for sleeping well?"]
    assert kept(texts, evals, 10) == ["How do I bake sourdough bread at home?",
                                      "What are good habits for sleeping well?"]
    assert kept(texts, evals, 1) == ["How do I bake sourdough bread at home?"]


def test_generation_resumes_and_committed_texts_come_first(tok, tmp_path):
    """A stand-in engine that writes turns (three in four left open) is asked again until enough
    pass; a second call reads its file back without asking; committed texts are used first."""
    eos = tok.eos_token_id
    calls = []

    def generate(inp, out, max_new):
        rows = [json.loads(line) for line in inp.read_text().splitlines()]
        done = {json.loads(line)["id"] for line in out.read_text().splitlines()} if out.is_file() else set()
        calls.append(len(rows) - len(done))
        assert all(r["prompt_ids"] == user_turn_prefix(tok) and r["top_p"] == self_requests.TOP_P for r in rows)
        with open(out, "a") as f:
            for r in rows:
                if r["id"] in done:
                    continue
                ids = tok(f"Please explain topic number {r['id']} in simple words.")["input_ids"]
                f.write(json.dumps({"id": r["id"], "answer_ids": ids + ([eos] if r["id"] % 4 == 0 else [])}) + "\n")

    got = written_requests(tmp_path, tok, eos, 12, [], generate)
    assert len(got) == 12 and len(calls) >= 2 and "topic number 1 " not in " ".join(got)
    n_calls = len(calls)
    assert written_requests(tmp_path, tok, eos, 12, [], generate) == got and len(calls) == n_calls
    mine = ["A committed request, one.", "Another committed request."]
    assert written_requests(tmp_path / "none", tok, eos, 2, [], generate, committed=mine) == mine


def test_committed_self_written_requests_are_usable_and_disjoint():
    """The committed requests the target wrote (after the 25,000 of the stream) are distinct, of
    the kept length, under 60% word overlap with every evaluation prompt, and all answered."""
    from eagle_nb.train.drafter_scale import ScaleConfig, read_committed
    reqs, answers = read_committed(texts=False)
    mine = [r for r in reqs if r["source"].get("by") == self_requests.SOURCE]
    c = ScaleConfig()
    assert len(mine) == c.self_requests and [r["id"] for r in mine] == list(range(c.requests, c.requests + c.self_requests))
    texts = [r["source"]["text"] for r in mine]
    evals = [json.loads(line)["messages"][-1]["content"] for line in REAL.prompts.read_text().splitlines()]
    assert kept(texts, evals, len(texts)) == texts
    assert all(answers[r["id"]]["answer_ids"] for r in mine)
