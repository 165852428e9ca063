"""An engine's Prometheus `/metrics` page -> its speculative-decoding numbers: the one reader and
the one fetcher of `/metrics`, used by `engine compare` (counters differenced around a run) and the
doctor's observation (observation.py).

Which engine a sample belongs to is its entry's prefix (registry.py): vLLM's counters
`vllm:spec_decode_num_drafts[_total]`, `..._num_draft_tokens`, `..._num_accepted_tokens` and
`..._num_accepted_tokens_per_pos{position="i"}`, and llama-server's same counters under
`llamacpp:spec_decode_`, are read alike; samples are summed over label sets other than `position`
(several engines or models behind one server add up). SGLang exposes gauges
(`sglang:spec_accept_length`, ...) of its last log interval, which cannot be differenced.
Unparseable lines are skipped. Knows metric names and HTTP GET only.
"""
from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from eagle_nb.engines import registry
from eagle_nb.engines.server import EngineError

SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text: str):
    """(name, labels dict, value) for every sample line; comments and unparseable lines skipped."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        yield m.group(1), dict(LABEL.findall(m.group(2) or "")), v


@dataclass
class Counters:
    """Speculative-decoding metrics of one `/metrics` page (or the difference of two)."""
    engine: str                                   # the registry name whose samples these are, or "none"
    num_drafts: float = 0.0
    num_draft_tokens: float = 0.0
    num_accepted_tokens: float = 0.0
    accepted_per_pos: list[float] = field(default_factory=list)
    gauges: dict = field(default_factory=dict)    # gauges by name after the ':' (spec_accept_length, ...)
    generation_tokens: float = 0.0                # generated-tokens counter (to spot other traffic)

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
    """Prometheus text -> Counters of the first registered engine whose counters it holds, else of
    the engine whose gauges it holds, else Counters("none")."""
    engines = registry.ENGINES
    totals: dict[str, dict] = {}
    per_pos: dict[str, dict] = {}
    gauges: dict[str, dict] = {}
    gen: dict[str, float] = {}
    for name, labels, v in samples(text):
        for e in engines:
            if e.counter_prefix and name.startswith(e.counter_prefix) and not name.endswith("_created"):
                base = name[len(e.counter_prefix):].removesuffix("_total")
                if base != "num_accepted_tokens_per_pos":
                    t = totals.setdefault(e.name, {})
                    t[base] = t.get(base, 0.0) + v
                elif "position" in labels:
                    p, i = per_pos.setdefault(e.name, {}), int(labels["position"])
                    p[i] = p.get(i, 0.0) + v
            elif e.generated_counter == name:
                gen[e.name] = gen.get(e.name, 0.0) + v
            elif e.gauge_prefix and name.startswith(e.gauge_prefix):
                gauges.setdefault(e.name, {})[name.split(":", 1)[1]] = v
    for e in engines:
        if e.name in totals or e.name in per_pos:
            t, p = totals.get(e.name, {}), per_pos.get(e.name, {})
            k = max(p) + 1 if p else 0
            return Counters(e.name, t.get("num_drafts", 0.0), t.get("num_draft_tokens", 0.0),
                            t.get("num_accepted_tokens", 0.0), [p.get(i, 0.0) for i in range(k)],
                            generation_tokens=gen.get(e.name, 0.0))
    name = next((e.name for e in engines if e.name in gauges), None)
    return Counters(name, gauges=gauges[name]) if name else Counters("none")


def metrics_url(url: str) -> str:
    """`url` with `/metrics` appended unless it already ends with it."""
    u = url.rstrip("/")
    return u if u.endswith("/metrics") else u + "/metrics"


def fetch_metrics(url: str, timeout: float = 10.0) -> str:
    """The text of `url`/metrics (the user's own server, or one the kit started)."""
    u = metrics_url(url)
    try:
        with urllib.request.urlopen(u, timeout=timeout) as r:     # noqa: S310 - a server the user names
            return r.read().decode(errors="replace")
    except (OSError, urllib.error.URLError) as e:
        raise EngineError(f"cannot read {u}: {e}") from None


def scrape(url: str, timeout: float = 10.0) -> Counters:
    """GET `url`/metrics and parse the speculative-decoding metrics."""
    return parse_metrics(fetch_metrics(url, timeout))
