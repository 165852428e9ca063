"""Expected against observed: the same prompts through the kit's reference loop and through a real
engine, side by side per draft position, with token-level output agreement and a verdict.

The engine's acceptance comes from its Prometheus counters, differenced around this run. For a
chain of depth k the counters determine every metric the kit defines: position i accepted in
`accepted_per_pos[i]` of `num_drafts` cycles, so exactly m drafts were accepted in
`pp[m-1] - pp[m]` cycles; that histogram goes through `metrics.acceptance_metrics` unchanged.
Knows the session API (through `reference_run`, the one adapter) and the engine endpoints; no
model code.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field

import pandas as pd

from eagle_nb.engines import registry
from eagle_nb.engines import sampling_probe as SP
from eagle_nb.engines.agreement import agreement, step_agreement
from eagle_nb.engines.engine_run import run_on_engine, unavailable_reason
from eagle_nb.engines.metrics import Counters
from eagle_nb.loop.metrics import (
    AcceptanceMetrics,
    acceptance_metrics,
    sglang_log_line,
    vllm_log_line,
)

# Measured on the shipped pair, greedy, 16 prompts x 64 tokens, k = 4, vLLM 0.32 CPU (docs/engines.md):
# |delta tau| and the largest per-position gap, with headroom.
GREEDY_TAU_TOL = 0.10
GREEDY_POS_TOL = 0.04
CONCURRENCY_WARNING = ("the engine's counters are server-wide: any other traffic on this server "
                       "between the two scrapes is counted as this run's")


def reference_run(pair, prompts, *, depth, max_new_tokens, temperature, seed, ablations=(),
                  verify_rule=None):
    """THE adapter to `eagle_nb.experiment.pair` (its API is being redesigned): run the reference loop and
    return (AcceptanceMetrics, generated ids per prompt, notes, SpecStats per prompt)."""
    rule = {"verify_rule": verify_rule} if verify_rule and temperature else {}
    res = pair.run(list(prompts), depth=depth, max_new_tokens=max_new_tokens,
                   temperature=temperature, seed=seed, faults=tuple(ablations), progress=False, **rule)
    return res.metrics, [list(s.tokens) for s in res.stats], list(res.notes), res.stats


def metrics_from_counters(c: Counters, depth: int) -> AcceptanceMetrics:
    """A counter delta (vLLM's counter names) -> the kit's AcceptanceMetrics, via the exact histogram."""
    n = int(round(c.num_drafts))
    if n <= 0:
        raise ValueError("the engine counted no drafts in this run (speculation off, or no decode step)")
    if len(c.accepted_per_pos) != depth:
        raise ValueError(f"the engine reports {len(c.accepted_per_pos)} draft positions, the run asked "
                         f"for depth {depth}: is the server's num_speculative_tokens {depth}?")
    pp = [n] + [int(round(x)) for x in c.accepted_per_pos] + [0]
    counts = []
    for m in range(depth + 1):
        counts += [m] * (pp[m] - pp[m + 1])
    if len(counts) != n or sum(counts) != int(round(c.num_accepted_tokens)):
        raise ValueError(f"engine counters are not a chain's: drafts {n}, accepted "
                         f"{c.num_accepted_tokens}, per position {c.accepted_per_pos}")
    return acceptance_metrics(counts, depth)


def sampling_se(m: AcceptanceMetrics) -> float:
    """Standard error of tau from its per-cycle accepted-count histogram."""
    p = m.accept_histogram
    mean = sum(i * q for i, q in enumerate(p))
    var = sum((i - mean) ** 2 * q for i, q in enumerate(p))
    return math.sqrt(var / max(m.verify_steps, 1))


@dataclass
class Comparison:
    setting: dict
    reference: AcceptanceMetrics
    engine: AcceptanceMetrics | None          # None when the engine gives no counters (gauges only)
    engine_counters: Counters
    agreement: dict
    tolerance: dict
    verdict_kind: str          # match | under-accepts | over-accepts | unknown | not-run | engine-sampling-broken
    verdict: str
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    engine_log: object = None                  # ParsedLog of the server's log (when we hold the server)

    @property
    def delta_tau(self) -> float | None:
        return None if self.engine is None else self.engine.accept_length - self.reference.accept_length

    @property
    def per_position_gap(self) -> list[float] | None:
        if self.engine is None:
            return None
        return [e - r for e, r in zip(self.engine.per_position_acceptance,
                                      self.reference.per_position_acceptance)]

    def table(self) -> pd.DataFrame:
        """Metric rows x (reference, engine, engine - reference)."""
        rows = []

        def add(name, r, e):
            rows.append({"metric": name, "reference": r, "engine": e,
                         "engine - reference": None if e is None or r is None else e - r})
        R, E = self.reference, self.engine
        add("tau (mean acceptance length)", R.accept_length, E and E.accept_length)
        for i, r in enumerate(R.per_position_acceptance):
            add(f"acceptance at position {i}", r, E and E.per_position_acceptance[i])
        add("draft acceptance rate", R.draft_acceptance_rate, E and E.draft_acceptance_rate)
        for i, r in enumerate(R.conditional_alpha):
            add(f"conditional alpha {i}", r, E and E.conditional_alpha[i])
        add("SGLang accept rate (accept_len / num_draft_tokens)", R.sglang_accept_rate_by_draft_tokens,
            E and E.sglang_accept_rate_by_draft_tokens)
        add("SGLang accept rate (accepted / proposed drafts)", R.draft_acceptance_rate,
            E and E.draft_acceptance_rate)
        add("verify steps", R.verify_steps, E and E.verify_steps)
        return pd.DataFrame(rows)

    def to_json(self) -> dict:
        out = {"setting": self.setting, "verdict_kind": self.verdict_kind, "verdict": self.verdict,
               "delta_tau": self.delta_tau, "per_position_gap": self.per_position_gap,
               "tolerance": self.tolerance, "agreement": self.agreement,
               "reference": {**self.reference.as_dict(), "vllm_log_line": vllm_log_line(self.reference),
                             "sglang_log_line": sglang_log_line(self.reference)},
               "engine": None if self.engine is None else
               {**self.engine.as_dict(), "vllm_log_line": vllm_log_line(self.engine),
                "sglang_log_line": sglang_log_line(self.engine)},
               "engine_counters": self.engine_counters.as_dict(), "warnings": self.warnings,
               "notes": self.notes,
               "engine_log": None if self.engine_log is None else self.engine_log.summary}
        json.dumps(out)                                  # fail here, not in the caller, if not plain
        return out


def judge(ref: AcceptanceMetrics, eng: AcceptanceMetrics | None, temperature: float,
          tau_tol: float | None = None, pos_tol: float | None = None) -> tuple[str, str, dict]:
    """Verdict and the tolerance it used: the measured greedy agreement, widened at T > 0 by twice
    the sampling standard error of the difference (tau: from both runs' accepted-count histograms;
    each position: binomial)."""
    if eng is None:
        return "unknown", "the engine exposes no acceptance counters to compare", {}
    se = math.hypot(sampling_se(ref), sampling_se(eng))
    # per position: binomial standard error of each run's rate, combined
    pos_se = [math.sqrt(p * (1 - p) / ref.verify_steps + q * (1 - q) / eng.verify_steps)
              for p, q in zip(ref.per_position_acceptance, eng.per_position_acceptance)]
    sampled = temperature != 0
    tau_tol = tau_tol if tau_tol is not None else max(GREEDY_TAU_TOL, 2 * se if sampled else 0.0)
    pos_tols = [pos_tol if pos_tol is not None else max(GREEDY_POS_TOL, 2 * s if sampled else 0.0)
                for s in pos_se]
    tol = {"tau": tau_tol, "per_position": pos_tols, "tau_sampling_se": se}
    d = eng.accept_length - ref.accept_length
    gaps = [e - r for e, r in zip(eng.per_position_acceptance, ref.per_position_acceptance)]
    profile = ", ".join(f"{g:+.3f}" for g in gaps)
    if abs(d) <= tau_tol and all(abs(g) <= t for g, t in zip(gaps, pos_tols)):
        return "match", (f"engine matches the reference loop: tau {eng.accept_length:.2f} vs "
                         f"{ref.accept_length:.2f} (|delta| {abs(d):.2f} <= {tau_tol:.2f}); per-position "
                         f"gap {profile} (each within {max(pos_tols):.3f})"), tol
    kind = "under-accepts" if d < 0 else "over-accepts"
    return kind, (f"engine {kind} by delta tau {d:+.2f} (tau {eng.accept_length:.2f} vs reference "
                  f"{ref.accept_length:.2f}, tolerance {tau_tol:.2f}); per-position gap engine - "
                  f"reference: {profile}"), tol


def compare(target=None, drafter=None, prompts=None, *, depth: int = 4, max_new_tokens: int = 64,
            temperature: float = 0.0, seed: int = 0, ablations=(), url: str | None = None,
            server=None, engine_drafter=None, pair=None, n_prompts: int | None = None,
            tau_tol: float | None = None, pos_tol: float | None = None,
            startup_timeout: float = 900.0, missing_engine: str = "raise",
            server_kw: dict | None = None, engine: str = "vllm", broken: str | None = None,
            draft_sample_method: str | None = None, concurrency: int | None = None) -> Comparison:
    """Run `prompts` (default: the shipped evaluation prompts) through the reference loop (`drafter`
    with the named `ablations`, i.e. the kit's prediction) and through the engine: `server` (a
    running server of the registry's, e.g. VllmServer / LlamaServer), `url` (a server someone else
    runs), or else a server of `engine` (a registry name: "vllm"; "llama.cpp" converts HF
    directories to GGUF and serves GGUF files as they are) launched here, in the entry's dtype, for
    `target` + (`engine_drafter` or `drafter`, default the shipped drafter file the engine reads)
    and stopped afterwards. `broken` (a fault name): the engine serves a copy of that drafter with the
    fault written the engine's way (its entry's `write_broken`) and the reference loop switches the
    same fault on. At T > 0 the reference loop verifies with the rule the engine's
    `draft_sample_method` implies (its entry's `draft_methods`; default: the engine's default; a
    server launched here is given it). `concurrency`: requests in flight (entries that take it).
    `missing_engine="reference-only"` (notebooks): when no engine environment exists and no server
    or URL is given, return the reference side alone, verdict_kind "not-run" with the reason."""
    if missing_engine not in ("raise", "reference-only"):
        raise ValueError(f"missing_engine must be 'raise' or 'reference-only', got {missing_engine!r}")
    if engine_drafter is not None and (url is not None or server is not None):
        raise ValueError("engine_drafter applies to a server launched here; a running server or URL "
                         "already serves its own drafter")
    engine = getattr(server, "engine", None) or engine    # a server says which engine it is
    e = registry.entry(engine)
    from eagle_nb.experiment.pair import Pair
    from eagle_nb.io.paths import SHIPPED
    pair = pair or Pair(target, drafter)                # a shipped half names the other half
    target = target or pair.target_path
    default = getattr(pair.files or SHIPPED, e.shipped_drafter)   # the shipped drafter file this engine reads
    if broken is not None:
        engine_drafter = broken_copy(e, broken, engine_drafter or drafter or default, target,
                                     launched=url is None and server is None)
        ablations = tuple(ablations) + ((broken,) if broken not in ablations else ())
    method, rule = draft_method(e, draft_sample_method)
    if draft_sample_method is not None and url is None and server is None:
        server_kw = {**(server_kw or {}), "draft_sample_method": draft_sample_method}
    prompts = list(prompts) if prompts is not None else pair.prompts(n_prompts)
    ids = [pair.encode(p)[0].tolist() for p in prompts]
    ref, ref_ids, notes, ref_stats = reference_run(pair, prompts, depth=depth, max_new_tokens=max_new_tokens,
                                        temperature=temperature, seed=seed, ablations=ablations,
                                        verify_rule=rule)
    if url is None and server is None and missing_engine == "reference-only":
        reason = unavailable_reason(engine)
        if reason:
            return Comparison({"depth": depth, "max_new_tokens": max_new_tokens, "temperature": temperature,
                               "prompts": len(prompts), "reference_ablations": list(ablations),
                               "engine_kind": engine},
                              ref, None, Counters("none"), {"available": False, "prompts": len(prompts)},
                              {}, "not-run", f"engine not run: {reason}", [], notes, None)
    then = None
    if temperature and e.complete is not None:     # the engine's sampled path, probed near T = 0
        greedy = reference_run(pair, prompts, depth=depth, max_new_tokens=max_new_tokens, temperature=0.0,
                               seed=seed, ablations=ablations)[1]
        then = lambda u: SP.near_greedy(e, u, ids, greedy, max_new_tokens, seed)   # noqa: E731
    run = run_on_engine(engine, ids, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed,
                        url=url, server=server, target=target,
                        drafter=engine_drafter or drafter or default, depth=depth,
                        startup_timeout=startup_timeout, server_kw=server_kw, concurrency=concurrency,
                        then=then)
    delta, out, log = run.counters, run.outputs, run.log
    if e.sampling_note and temperature:
        notes.append(e.sampling_note)
    warns = [] if run.launched_here else [CONCURRENCY_WARNING]
    got = sum(len(o) for o in out if o is not None)
    if delta.generation_tokens and got and delta.generation_tokens > got:
        warns.append(f"the server generated {delta.generation_tokens:.0f} tokens between the scrapes, "
                     f"this run asked for {got}: other traffic is mixed into these counters")
    counted = delta.engine in registry.names() and registry.entry(delta.engine).counts
    eng = metrics_from_counters(delta, depth) if counted else None
    if delta.gauges:
        notes.append(f"{delta.engine} exposes gauges of its last log interval, not counters: "
                     f"{delta.gauges}; read its log with `parse_log` for acceptance over time")
    kind, verdict, tol = judge(ref, eng, temperature, tau_tol, pos_tol)
    if run.after is not None and not run.after["ok"]:
        kind, verdict = "engine-sampling-broken", SP.verdict(run.after, e.label)
    for w in warns:
        warnings.warn(w, stacklevel=2)
    setting = {"depth": depth, "max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed,
               "prompts": len(prompts), "reference_ablations": list(ablations),
               "target": str(target or "shipped"), "drafter": str(drafter or "shipped"),
               "engine_kind": engine, "engine": run.url, "engine_drafter": run.drafter,
               "engine_launched_here": run.launched_here, "engine_startup_s": run.startup_s,
               "draft_sample_method": method, "verify_rule": rule if temperature else "greedy",
               "concurrency": concurrency}
    agree = agreement(ref_ids, out)
    if run.after is not None:
        agree["near_greedy"] = run.after
    steps = step_agreement(ref_stats, run.timings)
    if steps is not None:
        agree.update(steps)
    return Comparison(setting, ref, eng, delta, agree, tol, kind, verdict, warns, notes, log)


def draft_method(e, asked: str | None) -> tuple[str | None, str | None]:
    """(the engine's draft-sampling setting, the kit's verify rule for it at T > 0): the one asked
    for, else the engine's default (first in its entry's `draft_methods`); (None, None) for an
    engine without the setting, which is refused when one is asked for."""
    if not e.draft_methods:
        if asked is not None:
            raise ValueError(f"{e.label} takes no draft_sample_method (asked {asked!r})")
        return None, None
    method = asked or next(iter(e.draft_methods))
    if method not in e.draft_methods:
        raise ValueError(f"draft_sample_method {method!r}: {e.label} takes {list(e.draft_methods)}")
    return method, e.draft_methods[method]


def broken_copy(e, fault: str, src, target, launched: bool):
    """A copy of drafter `src` with `fault` written the way engine `e` reads it (a temporary path)."""
    import tempfile
    from pathlib import Path
    if not launched:
        raise ValueError("broken= applies to a server launched here; a running server or URL serves its own drafter")
    can = e.broken_faults() if e.broken_faults else ()
    if fault not in can:
        raise ValueError(f"{e.label} gets no broken drafter for {fault!r}; it can be shown: {list(can)}")
    return e.write_broken(src, Path(tempfile.mkdtemp(prefix="eagle_nb_broken_")) / fault, fault, target)


def side_by_side(comparisons: dict) -> pd.DataFrame:
    """tau and per-position acceptance of several comparisons (name -> Comparison) as columns
    `<name>: reference` and `<name>: engine`, one row per metric."""
    cols = {}
    for name, c in comparisons.items():
        for side, m in (("reference", c.reference), ("engine", c.engine)):
            vals = [None] * (1 + c.reference.depth) if m is None else [m.accept_length, *m.per_position_acceptance]
            cols[f"{name}: {side}"] = vals
    k = next(iter(comparisons.values())).reference.depth
    return pd.DataFrame(cols, index=["tau"] + [f"position {i}" for i in range(k)])
