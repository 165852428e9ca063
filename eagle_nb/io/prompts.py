"""Prompts from users: a JSON-lines prompt file or a list from Python. A prompt is either raw text
(`{"prompt": "..."}`, what a completions endpoint receives) or a `Chat` (`{"messages": [{"role":
"user", "content": "..."}]}`, what a chat endpoint receives, rendered with the target's chat
template and its generation prompt by `model.limits.encode`). One file holds one kind: a
workload goes through one endpoint. Other fields of a line (`category`, `language`, `source`)
are kept by `read_prompt_rows`.

Reading is safe (files.py): a regular file only (a FIFO never blocks), under a size cap, UTF-8
with the file and line of a bad byte named. Each prompt must be a non-empty string. How long a
prompt may be in tokens depends on the target and is checked by model/limits.py. Knows nothing about
tokenizers or models.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from eagle_nb.io.files import PROMPTS_CAP, UserFileError, decode_utf8, read_bytes, show

ROLES = ("system", "user", "assistant")


class PromptError(UserFileError):
    """A prompt file or prompt list is malformed; the message names the file and line (or index)."""


@dataclass(frozen=True)
class Chat:
    """A conversation as a chat endpoint receives it: (role, content) turns, the last one the
    user's. Frozen and hashable (results are cached per prompt)."""
    messages: tuple[tuple[str, str], ...]

    @classmethod
    def user(cls, text: str, system: str | None = None) -> "Chat":
        return cls(((("system", system),) if system is not None else ()) + (("user", text),))

    @classmethod
    def from_dicts(cls, messages, where: str = "messages") -> "Chat":
        if not isinstance(messages, list) or not messages:
            raise PromptError(f"{where}: expected a non-empty list of {{'role', 'content'}} objects")
        turns = []
        for i, m in enumerate(messages):
            if not (isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)
                    and m["content"]):
                raise PromptError(f"{where}[{i}]: expected {{'role': one of {list(ROLES)}, 'content': "
                                  f"a non-empty string}}, got {str(m)[:80]}")
            turns.append((m["role"], m["content"]))
        if turns[-1][0] != "user":
            raise PromptError(f"{where}: the last turn is {turns[-1][0]!r}; a request ends with the "
                              f"user's turn (the template then adds the assistant's prefix)")
        return cls(tuple(turns))

    def as_dicts(self) -> list[dict]:
        return [{"role": r, "content": c} for r, c in self.messages]

    @property
    def text(self) -> str:
        """The user's last turn (what the request asks)."""
        return self.messages[-1][1]

    def __str__(self) -> str:
        return self.text


def read_prompts(path, cap: int = PROMPTS_CAP) -> list:
    """Prompt file: JSON lines, each an object with a non-empty string `prompt` field (raw text) or
    a `messages` list (a `Chat`), all lines of one kind. Blank lines are skipped. Errors name the
    file and line."""
    return [row["prompt"] for row in read_prompt_rows(path, cap)]


def read_prompt_rows(path, cap: int = PROMPTS_CAP) -> list[dict]:
    """The prompt file's lines as dicts: `prompt` (str or Chat) and the line's other fields."""
    data = read_bytes(path, "prompt file", cap)
    out, first = [], {}
    for n, raw in enumerate(data.split(b"\n"), 1):
        line = decode_utf8(raw, path, "prompt file", line=n).strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise PromptError(f"prompt file {show(path)}:{n}: not valid JSON ({e}); each line must be "
                              f'an object such as {{"prompt": "def f(x):"}}') from None
        if isinstance(row, dict) and "messages" in row and "prompt" not in row:
            row["prompt"] = Chat.from_dicts(row.pop("messages"), f"prompt file {show(path)}:{n}: messages")
        elif not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise PromptError(f"prompt file {show(path)}:{n}: expected an object with a string "
                              f"'prompt' field (raw text) or a 'messages' list (a chat), got "
                              f"{type(row).__name__}"
                              + (f" with keys {sorted(row)[:6]}" if isinstance(row, dict) else ""))
        elif not row["prompt"]:
            raise PromptError(f"prompt file {show(path)}:{n}: the prompt is empty")
        kind = "chat ('messages')" if isinstance(row["prompt"], Chat) else "raw ('prompt')"
        first.setdefault(kind, n)
        if len(first) > 1:
            other = next(k for k in first if k != kind)
            raise PromptError(f"prompt file {show(path)}:{n}: a {kind} entry after {other} entries "
                              f"(first at line {first[other]}); a workload goes through one endpoint "
                              f"(chat or completions): put the two kinds in separate files")
        out.append(row)
    if not out:
        raise PromptError(f"prompt file {show(path)}: no prompts found (JSON lines with a 'prompt' field)")
    return out


def raw_note(prompts, tokenizer) -> str | None:
    """A note naming the raw prompts sent to a target that has a chat template (one of the
    serving conditions: a completions endpoint sends them untemplated), or None when there are none
    or the tokenizer has no template."""
    raw = sum(not isinstance(p, Chat) for p in prompts)
    if not raw or not getattr(tokenizer, "chat_template", None):
        return None
    return (f"{raw} of {len(prompts)} prompts are raw: sent to a target with a chat template without it "
            f"(what a completions endpoint sends; a chat endpoint templates them: --chat, or 'messages' "
            f"in a prompt file)")


def check_prompts(prompts) -> list:
    """A list of non-empty strings or `Chat`s. A bare string is refused (iterating it would give
    one prompt per character)."""
    if isinstance(prompts, (str, bytes)):
        raise PromptError("prompts must be a list of strings; got a single string (wrap it: [prompt])")
    try:
        prompts = list(prompts)
    except TypeError:
        raise PromptError(f"prompts must be a list of strings, got {type(prompts).__name__}") from None
    if not prompts:
        raise PromptError("prompts is an empty list; give at least one prompt")
    for i, p in enumerate(prompts):
        if isinstance(p, Chat):
            continue
        if not isinstance(p, str):
            raise PromptError(f"prompt {i} is a {type(p).__name__}, expected a string or a Chat")
        if not p:
            raise PromptError(f"prompt {i} is empty")
    return prompts


def write_prompt_rows(path, rows) -> "Path":
    """Write `rows` ({'prompt': str or Chat, other fields}) as a prompt file `read_prompt_rows`
    reads back; returns the path."""
    from pathlib import Path
    lines = []
    for row in rows:
        p = row["prompt"]
        head = {"messages": p.as_dicts()} if isinstance(p, Chat) else {"prompt": p}
        lines.append(json.dumps({**head, **{k: v for k, v in row.items() if k != "prompt"}}))
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path
