"""Prompts from users: a JSON-lines prompt file (one object with a string `prompt` field per line)
or a list of strings from Python.

Reading is safe (files.py): a regular file only (a FIFO never blocks), under a size cap, UTF-8
with the file and line of a bad byte named. Each prompt must be a non-empty string. How long a
prompt may be in tokens depends on the target and is checked by limits.py. Knows nothing about
tokenizers or models.
"""
from __future__ import annotations

import json

from eagle_nb.io.files import PROMPTS_CAP, UserFileError, decode_utf8, read_bytes, show


class PromptError(UserFileError):
    """A prompt file or prompt list is malformed; the message names the file and line (or index)."""


def read_prompts(path, cap: int = PROMPTS_CAP) -> list[str]:
    """Prompt file: JSON lines, each an object with a non-empty string `prompt` field. Blank lines
    are skipped. Errors name the file and line."""
    data = read_bytes(path, "prompt file", cap)
    out = []
    for n, raw in enumerate(data.split(b"\n"), 1):
        line = decode_utf8(raw, path, "prompt file", line=n).strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise PromptError(f"prompt file {show(path)}:{n}: not valid JSON ({e}); each line must be "
                              f'an object such as {{"prompt": "def f(x):"}}') from None
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise PromptError(f"prompt file {show(path)}:{n}: expected an object with a string "
                              f"'prompt' field, got {type(row).__name__}"
                              + (f" with keys {sorted(row)[:6]}" if isinstance(row, dict) else ""))
        if not row["prompt"]:
            raise PromptError(f"prompt file {show(path)}:{n}: the prompt is empty")
        out.append(row["prompt"])
    if not out:
        raise PromptError(f"prompt file {show(path)}: no prompts found (JSON lines with a 'prompt' field)")
    return out


def check_prompts(prompts) -> list[str]:
    """A list of non-empty strings. A bare string is refused (iterating it would give one prompt
    per character)."""
    if isinstance(prompts, (str, bytes)):
        raise PromptError("prompts must be a list of strings; got a single string (wrap it: [prompt])")
    try:
        prompts = list(prompts)
    except TypeError:
        raise PromptError(f"prompts must be a list of strings, got {type(prompts).__name__}") from None
    if not prompts:
        raise PromptError("prompts is an empty list; give at least one prompt")
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise PromptError(f"prompt {i} is a {type(p).__name__}, expected a string")
        if not p:
            raise PromptError(f"prompt {i} is empty")
    return prompts
