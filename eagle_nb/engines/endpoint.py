"""Talking to a running engine over HTTP: OpenAI-compatible completions with token-id prompts,
and the Prometheus `/metrics` acceptance counters.

vLLM exposes counters (`vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
`..._num_accepted_tokens_total`, `..._num_accepted_tokens_per_pos_total{position="i"}`), so the
difference of two scrapes is exactly this run's acceptance (plus whatever else the server served
meanwhile). SGLang exposes gauges (`sglang:spec_accept_length`, `sglang:spec_accept_rate`) of its
last log interval, which cannot be differenced. Knows HTTP and the metric names; no models.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from eagle_nb.engines.server import EngineError, http_get, http_post_json
from eagle_nb.io.prometheus import read_spec_metrics


@dataclass
class Counters:
    """Speculative-decoding metrics scraped from one `/metrics` page."""
    engine: str                                   # "vllm", "sglang" or "none"
    num_drafts: float = 0.0
    num_draft_tokens: float = 0.0
    num_accepted_tokens: float = 0.0
    accepted_per_pos: list[float] = field(default_factory=list)
    gauges: dict = field(default_factory=dict)    # SGLang: spec_accept_length, spec_accept_rate, ...
    generation_tokens: float = 0.0                # vllm:generation_tokens_total (to spot other traffic)

    def __sub__(self, before: "Counters") -> "Counters":
        if self.engine != before.engine:
            raise EngineError(f"cannot subtract {before.engine} counters from {self.engine} counters")
        n = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
        pad = lambda v: list(v) + [0.0] * (n - len(v))  # noqa: E731
        d = Counters(self.engine, self.num_drafts - before.num_drafts,
                     self.num_draft_tokens - before.num_draft_tokens,
                     self.num_accepted_tokens - before.num_accepted_tokens,
                     [a - b for a, b in zip(pad(self.accepted_per_pos), pad(before.accepted_per_pos))],
                     dict(self.gauges), self.generation_tokens - before.generation_tokens)
        if min([d.num_drafts, d.num_draft_tokens, d.num_accepted_tokens, *d.accepted_per_pos]) < 0:
            raise EngineError("a counter went down between the two scrapes: the server restarted")
        return d

    def as_dict(self) -> dict:
        return {"engine": self.engine, "num_drafts": self.num_drafts, "num_draft_tokens": self.num_draft_tokens,
                "num_accepted_tokens": self.num_accepted_tokens, "accepted_per_pos": self.accepted_per_pos,
                "gauges": self.gauges, "generation_tokens": self.generation_tokens}


def parse_metrics(text: str) -> Counters:
    """Prometheus text -> Counters (read by `io.prometheus`, the one `/metrics` reader). Samples
    are summed over labels other than `position` (several engines or models behind one server add up)."""
    m = read_spec_metrics(text)
    if m.engine == "vllm":
        t = m.totals
        return Counters("vllm", t.get("num_drafts", 0.0), t.get("num_draft_tokens", 0.0),
                        t.get("num_accepted_tokens", 0.0), list(m.accepted_per_pos),
                        generation_tokens=m.generation_tokens)
    return Counters(m.engine, gauges=m.gauges)


def scrape(url: str, timeout: float = 10.0) -> Counters:
    """GET `url`/metrics and parse the speculative-decoding metrics."""
    try:
        return parse_metrics(http_get(url.rstrip("/") + "/metrics", timeout=timeout))
    except OSError as e:
        raise EngineError(f"cannot read {url.rstrip('/')}/metrics: {e}") from None


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

    def scrape(self) -> Counters:
        return scrape(self.url)

    def complete(self, prompts: list[list[int]], max_tokens: int, temperature: float = 0.0,
                 seed: int | None = None, ignore_eos: bool = True) -> list[list[int] | None]:
        """One batched /v1/completions request with token-id prompts (so tokenization cannot
        differ); returns the generated ids per prompt in order, or None per prompt when the server
        does not return token ids (vLLM returns them for `return_token_ids`)."""
        body = {"model": self.model, "prompt": prompts, "max_tokens": int(max_tokens),
                "temperature": float(temperature), "ignore_eos": ignore_eos, "return_token_ids": True}
        if seed is not None:
            body["seed"] = int(seed)
        out = http_post_json(self.url + "/v1/completions", body)
        choices = sorted(out.get("choices", []), key=lambda c: c.get("index", 0))
        if len(choices) != len(prompts):
            raise EngineError(f"{self.url} answered {len(choices)} choices for {len(prompts)} prompts")
        return [None if c.get("token_ids") is None else [int(t) for t in c["token_ids"]]
                for c in choices]
