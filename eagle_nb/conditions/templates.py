"""How a chat request reaches the target in each serving mode: the renderers behind the
`template-*` serving conditions (docs/conditions.md, "Template rendering modes").

A drafter learns the token stream it was trained on. Trained on templated chats, it sees other
streams in serving when the request goes through a completions endpoint (no template), when the
template is applied without the assistant's generation prefix, or with a system prompt the
training data did not have (or without one it had). Each mode is a function of (tokenizer, `Chat`)
that returns the text the model is fed, and `encode_mode` turns it into ids as the endpoint does
(templated text carries its special tokens already, so none are added; raw text gets the
tokenizer's own, as a completions endpoint adds them). The healthy mode is `chat`, what
`limits.encode` does for a `Chat`. `chatml` is the one template the kit carries itself: ChatML
markers around the user's text, for a drafter trained on raw text and served templated (the
`chat-template-mismatch` condition); it needs no template in the tokenizer and is tokenised as
text, as a completions endpoint would.

Requests that arrive as raw text already rendered: `parse_chatml` reads a whole ChatML rendering
back into its `Chat` (and whether it ends with the generation prefix), and `template_kind` says
whether a tokenizer's template is ChatML, another, or none (the doctor's workload,
workload_summary.py).

NOTE: some templates insert a default system prompt when a chat has none (SmolLM2's does), so
`system-removed` on such a template still shows the model a system turn: the template's default.
A mode that needs a template refuses a tokenizer without one (`limits.ChatTemplateError`).
Knows tokenizers and `io.prompts.Chat`; nothing about drafters.
"""
from __future__ import annotations

import re

from eagle_nb.io.prompts import ROLES, Chat
from eagle_nb.model.limits import render_chat

DEFAULT_SYSTEM = "You are a helpful assistant."      # what `system-added` adds by default
# ChatML (the format of SmolLM2's, Qwen's and many other templates), user turn and assistant prefix
CHATML = "<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
CHATML_START, CHATML_PREFIX = "<|im_start|>", "<|im_start|>assistant\n"   # a turn; the generation prefix
CHATML_TURN = re.compile(r"<\|im_start\|>(\w+)\n(.*?)<\|im_end\|>\n?", re.S)


def as_chat(prompt) -> Chat:
    """A `Chat`, or a raw string taken as one user turn."""
    if isinstance(prompt, Chat):
        return prompt
    if isinstance(prompt, str) and prompt:
        return Chat.user(prompt)
    raise TypeError(f"expected a Chat or a non-empty string, got {type(prompt).__name__}")


def render_as_chat(tokenizer, prompt, **_) -> str:
    """`chat` (healthy): the tokenizer's template with the assistant's generation prefix, what a
    chat endpoint sends (vLLM /v1/chat/completions, SGLang's chat API)."""
    return render_chat(tokenizer, as_chat(prompt))


def render_raw(tokenizer, prompt, **_) -> str:
    """`raw` (`template-raw`): the user's text alone, as a completions endpoint receives it. A raw
    Kimi-K3 completion showed 3.93 tokens per step with EAGLE-3 only because its output looped over
    two tokens; chat-templated it gave 1.94 (lightseekorg/tokenspeed #1305). Llama-4 EAGLE-3 is poor on SGLang's
    generate API and fine on its chat API (sgl-project/sglang PR #6985)."""
    return as_chat(prompt).text


def render_no_generation_prompt(tokenizer, prompt, **_) -> str:
    """`no-generation-prompt` (`template-no-generation-prompt`): the template without the assistant
    prefix (`add_generation_prompt=False`). Appending Kimi-K3's 14-token assistant suffix to the
    same prompt moved the engine's tokens per step from 3.87 to 2.08 (lightseekorg/tokenspeed
    #1305)."""
    return render_chat(tokenizer, as_chat(prompt), generation_prompt=False)


def render_system_added(tokenizer, prompt, system: str = DEFAULT_SYSTEM, **_) -> str:
    """`system-added` (`template-system-prompt`): the chat with `system` as its system turn
    (replacing one it has), templated with the generation prefix: a system prompt the training
    data did not have. Template state the drafter never saw moves acceptance: thinking mode off
    took a DFlash drafter from 25% to 60% acceptance (z-lab/dflash #133)."""
    c = as_chat(prompt)
    turns = tuple(t for t in c.messages if t[0] != "system")
    return render_chat(tokenizer, Chat((("system", system),) + turns))


def render_system_removed(tokenizer, prompt, **_) -> str:
    """`system-removed` (`template-system-prompt`, the reverse): the chat without its system turns,
    templated with the generation prefix (a template with a default system prompt inserts its own;
    z-lab/dflash #133 as above)."""
    c = as_chat(prompt)
    return render_chat(tokenizer, Chat(tuple(t for t in c.messages if t[0] != "system")))


def render_chatml(tokenizer, prompt, **_) -> str:
    """`chatml` (`chat-template-mismatch`): the user's text between ChatML markers, whatever the
    tokenizer's own template (or none): a template the drafter never saw when it was trained on
    raw text. d2t/t2d and the training targets come from the training data's formatted tokens
    (docs/formats.md)."""
    return CHATML.format(text=as_chat(prompt).text)


# mode name -> (renderer, the registry condition it serves); `chat` is the healthy one
TEMPLATE_MODES = {
    "chat": (render_as_chat, None),
    "raw": (render_raw, "template-raw"),
    "no-generation-prompt": (render_no_generation_prompt, "template-no-generation-prompt"),
    "system-added": (render_system_added, "template-system-prompt"),
    "system-removed": (render_system_removed, "template-system-prompt"),
    "chatml": (render_chatml, "chat-template-mismatch"),
}
AS_TEXT = ("raw", "chatml")     # modes tokenised as plain text, with the tokenizer's special tokens


def check_mode(mode: str) -> str:
    if mode not in TEMPLATE_MODES:
        raise ValueError(f"unknown template mode {mode!r}; choose from {list(TEMPLATE_MODES)}")
    return mode


def render_mode(tokenizer, prompt, mode: str, **kw) -> str:
    """The text the target is fed for `prompt` (a Chat or raw string) served in `mode`."""
    return TEMPLATE_MODES[check_mode(mode)][0](tokenizer, prompt, **kw)


def encode_mode(tokenizer, prompt, mode: str, **kw):
    """(1, T) ids of `prompt` served in `mode`: text rendered by the tokenizer's template without
    added special tokens (it holds them), raw and `chatml` text with the tokenizer's own (as a
    completions endpoint tokenises it)."""
    text = render_mode(tokenizer, prompt, mode, **kw)
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=(mode in AS_TEXT))["input_ids"]
    if ids.shape[-1] == 0:
        raise ValueError(f"{text[:40]!r} ({mode}) encodes to 0 tokens with this tokenizer")
    return ids


# -- requests that arrive as text already rendered --------------------------------------------------
def parse_chatml(text: str) -> tuple[Chat | None, bool]:
    """(the Chat, whether it ends with the assistant's generation prefix) of raw text that is a
    whole ChatML rendering: turns `<|im_start|>role\\ncontent<|im_end|>` and nothing else but
    surrounding whitespace and, at the end, the prefix. (None, False) for text that is not (one
    stray marker, a role outside `io.prompts.ROLES`, a last turn not the user's)."""
    body = text.strip()
    prefix = body.endswith(CHATML_PREFIX.strip())
    if prefix:
        body = body[:-len(CHATML_PREFIX.strip())].rstrip()
    turns, end = [], 0
    for m in CHATML_TURN.finditer(body):
        if m.start() != end or m.group(1) not in ROLES or not m.group(2):
            return None, False
        turns.append((m.group(1), m.group(2)))
        end = m.end()
    if not turns or body[end:].strip() or turns[-1][0] != "user":
        return None, False
    return Chat(tuple(turns)), prefix


def template_kind(tokenizer) -> str:
    """What the tokenizer's chat template is: 'chatml' (it renders a user turn as ChatML does),
    'other', or 'none' (no template: a base or code model)."""
    if not getattr(tokenizer, "chat_template", None):
        return "none"
    probe = render_chat(tokenizer, Chat.user("probe"))
    return "chatml" if "<|im_start|>user\nprobe<|im_end|>" in probe else "other"
