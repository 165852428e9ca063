"""Talking to a running OpenAI-compatible engine over HTTP: the served model, its health, and
completions with token-id prompts (so tokenization cannot differ). Its `/metrics` page is read by
metrics.py. Knows HTTP and the OpenAI request shape; no models.
"""
from __future__ import annotations

import json

from eagle_nb.engines.server import EngineError, http_get, http_post_json


class Endpoint:
    """An OpenAI-compatible server at `url` (ours or the user's)."""

    def __init__(self, url: str, model: str | None = None):
        self.url = url.rstrip("/")
        self._model = model

    @property
    def model(self) -> str:
        if self._model is None:
            try:
                data = json.loads(http_get(self.url + "/v1/models"))["data"]
            except (OSError, KeyError, ValueError) as e:
                raise EngineError(f"cannot list models at {self.url}/v1/models: {e}") from None
            if not data:
                raise EngineError(f"{self.url}/v1/models lists no model")
            self._model = data[0]["id"]
        return self._model

    def health(self) -> bool:
        try:
            http_get(self.url + "/health", timeout=5)
            return True
        except OSError:
            return False

    def complete(self, prompts: list[list[int]], max_tokens: int, temperature: float = 0.0,
                 seed: int | None = None, ignore_eos: bool = True) -> list[list[int] | None]:
        """One batched /v1/completions request with token-id prompts (so tokenization cannot
        differ); returns the generated ids per prompt in order, or None per prompt when the server
        does not return token ids (vLLM returns them for `return_token_ids`)."""
        out = http_post_json(self.url + "/v1/completions",
                             self._body(prompts, max_tokens, temperature, seed, ignore_eos))
        choices = sorted(out.get("choices", []), key=lambda c: c.get("index", 0))
        if len(choices) != len(prompts):
            raise EngineError(f"{self.url} answered {len(choices)} choices for {len(prompts)} prompts")
        return [None if c.get("token_ids") is None else [int(t) for t in c["token_ids"]]
                for c in choices]

    def complete_each(self, prompts: list[list[int]], max_tokens: int, temperature: float = 0.0,
                      seed: int | None = None, ignore_eos: bool = False,
                      concurrency: int | None = None) -> tuple[list, list[dict | None]]:
        """One request per prompt, `concurrency` in flight (default: up to 16 at once; the server
        batches them), as a chat service sends them: (generated ids per prompt, the response's
        `metrics` object per prompt or None).
        vLLM attaches per-request speculative metrics only to one-sequence requests."""
        from concurrent.futures import ThreadPoolExecutor

        def one(x):
            out = http_post_json(self.url + "/v1/completions",
                                 self._body([x], max_tokens, temperature, seed, ignore_eos))
            c = (out.get("choices") or [{}])[0]
            ids = None if c.get("token_ids") is None else [int(t) for t in c["token_ids"]]
            return ids, out.get("metrics")

        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency {concurrency}: at least one request must be in flight")
        with ThreadPoolExecutor(max_workers=concurrency or min(16, max(1, len(prompts)))) as pool:
            got = list(pool.map(one, prompts))
        return [g[0] for g in got], [g[1] for g in got]

    def _body(self, prompts, max_tokens: int, temperature: float, seed, ignore_eos: bool) -> dict:
        """A /v1/completions request for token-id prompts, asking for the generated ids back."""
        body = {"model": self.model, "prompt": prompts, "max_tokens": int(max_tokens),
                "temperature": float(temperature), "ignore_eos": ignore_eos, "return_token_ids": True}
        if seed is not None:
            body["seed"] = int(seed)
        return body
