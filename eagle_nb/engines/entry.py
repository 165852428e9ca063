"""What one serving engine is: an `Engine` entry of the registry (registry.py), holding every fact
the kit uses about it, so that `eagle-nb engine log`, `engine compare`, `record --engine` and the
doctor read it from one place and no module compares engine names.

The facts come in five groups: its log (the text that marks an acceptance line, the line's parser,
its timestamp, how its lines are pooled, how they become an `Observation`); its `/metrics` page
(the prefix of its vLLM-named counters or of its gauges); running it here (how its server is
built, why it cannot be, how prompts are sent and the counters settle, the dtype it runs the
target in, the shipped drafter file it serves); what it is shown (how a recording is made on it,
how a broken drafter it serves is written); and its speculation conventions (its synthetic-
acceptance knobs from a profile, its chain flags for a draft length, its profile from what it
reports, and from a file of its responses with each request's τ, which layers it captures for a
drafter's config, what its target class must do). An engine the kit only reads (SGLang) leaves
the running fields empty; one it only configures (TensorRT-LLM) has its knobs alone. The small
helpers entries parse with (`NUM`, `fields`, `mean_se`) are here too. Knows nothing about any
engine in particular.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

NUM = r"(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"      # a number as the engines print it


def fields(line: str, spec: dict) -> dict:
    """{name: float} for every (name, regex with one number group) of `spec` found in `line`."""
    out = {}
    for name, pat in spec.items():
        m = re.search(pat, line)
        if m:
            out[name] = float(m.group(1))
    return out


def mean_se(xs) -> tuple[float, float]:
    """(mean, standard error) of pooled numbers (one per log line)."""
    xs = list(xs)
    n = len(xs)
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return m, (var / n) ** 0.5


@dataclass(frozen=True)
class Engine:
    name: str                      # what --engine takes; what a log row and an Observation name
    label: str                     # how prose names it ("vLLM"); the architecture notes start with it
    # -- its log ----------------------------------------------------------------------------------
    log_mark: str | None = None    # text that marks one of its acceptance lines
    parse_line: Callable[[str], dict | None] | None = field(default=None, repr=False)
    #   a marked line -> the row's fields (COLUMNS of logs.py); None: malformed (cut short)
    time_pattern: tuple[str, str] | None = None   # (regex of a line's timestamp, strptime format)
    summarise: Callable | None = field(default=None, repr=False)
    #   (its rows as a DataFrame, the log text, num_draft_tokens) -> (summary dict or None,
    #   {column: values for its rows} to fill in)
    observe: Callable | None = field(default=None, repr=False)
    #   (its rows as a DataFrame, its summary, the log text) -> Observation fields (a dict)
    # -- its /metrics page ------------------------------------------------------------------------
    counter_prefix: str | None = None      # counters named as vLLM's follow it (num_drafts, ...)
    generated_counter: str | None = None   # the generated-tokens counter (to spot other traffic)
    gauge_prefix: str | None = None        # gauges of its last log interval follow it
    tau_gauge: str | None = None           # the gauge (name after the ':') that is tau
    # -- running it here --------------------------------------------------------------------------
    server: Callable | None = field(default=None, repr=False)
    #   (target, drafter, depth, *, dtype, startup_timeout, **kw) -> a server, not yet started
    unavailable: Callable[[], str | None] | None = field(default=None, repr=False)
    #   why it cannot be launched here (None: it can)
    complete: Callable | None = field(default=None, repr=False)
    #   (url, token-id prompts, max_new_tokens, temperature, seed) -> (ids per prompt, per-answer
    #   details: timings, or the per-request metrics object)
    settle: Callable | None = field(default=None, repr=False)
    #   (scrape, counters before, outputs) -> counters once this run is booked (None: one scrape)
    log_settled: Callable | None = field(default=None, repr=False)
    #   (ParsedLog, the server's counters) -> whether its log has caught up with them
    dtype: str = "float32"         # dtype it runs the target in unless told (the kit's reference: fp32)
    shipped_drafter: str = "drafter_speculators"   # the shipped pair's file it serves (PairFiles field)
    sampling_note: str = ""        # why its acceptance at T > 0 is not the reference loop's quantity
    draft_methods: dict = field(default_factory=dict)
    #   its draft-sampling setting -> the kit's verify rule at T > 0 (model/config.py), its
    #   default first; empty: the server takes no such setting (the kit's DEFAULT_RULE)
    concurrency: bool = False      # whether `complete` takes `concurrency` (requests in flight)
    # -- what it is shown -------------------------------------------------------------------------
    record: Callable | None = field(default=None, repr=False)
    #   (target, prompt ids, out_dir, layer_ids, *, dtype, url, ...) -> recording directory
    write_broken: Callable | None = field(default=None, repr=False)
    #   (src, dst, fault, target) -> a broken drafter it serves, with the named fault
    broken_faults: Callable[[], tuple[str, ...]] | None = field(default=None, repr=False)
    #   the faults write_broken can write
    # -- its speculation conventions --------------------------------------------------------------
    knobs: Callable | None = field(default=None, repr=False)
    #   (SpeculationProfile, k or None, drafter path or None) -> its synthetic-acceptance settings
    render_knobs: Callable[[dict], str] | None = field(default=None, repr=False)
    #   those settings -> the lines a user pastes
    draft_flags: Callable[[int], dict | str] | None = field(default=None, repr=False)
    #   draft length k -> its chain flags ({flag or config key: value}); k = 0: why it is off (str)
    profile_from: Callable | None = field(default=None, repr=False)
    #   (what it reports: vLLM's responses, llama-server's log text; conditions) -> SpeculationProfile
    read_responses: Callable | None = field(default=None, repr=False)
    #   (the JSON values of a file of its responses, each carrying per-request metrics) ->
    #   (the SpeculationProfile pooled over them, each request's tau): the doctor's --observed FILE
    captures: Callable[[dict, list[int]], dict[str, list[int]]] | None = field(default=None, repr=False)
    #   (a drafter's raw config.json, the EAGLE-3 default HF ids) -> {who: HF ids it would capture}
    target_needs: str = ""         # what its target class must do to hand the drafter aux states

    def __post_init__(self):
        why = []
        if (self.log_mark is None) != (self.parse_line is None):
            why.append("a log reader needs both log_mark and parse_line")
        if self.time_pattern is not None:
            re.compile(self.time_pattern[0])
        if (self.counter_prefix is None and self.gauge_prefix is None and self.log_mark is None
                and self.knobs is None):
            why.append("an engine is read from its log or its /metrics page, or configured by its "
                       "knobs: give one of them")
        if (self.knobs is None) != (self.render_knobs is None):
            why.append("knobs and render_knobs go together")
        if (self.server is None) != (self.complete is None):
            why.append("an engine run here needs both server and complete")
        if (self.write_broken is None) != (self.broken_faults is None):
            why.append("write_broken and broken_faults go together")
        if why:
            raise ValueError(f"engine {self.name!r}: " + "; ".join(why))

    @property
    def runs_here(self) -> bool:
        return self.server is not None

    @property
    def counts(self) -> bool:
        """Whether its /metrics page has counters (differenced around a run) rather than gauges."""
        return self.counter_prefix is not None
