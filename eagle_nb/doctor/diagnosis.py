"""The doctor's result object: a verdict first, then every check, hypothesis and probe, as data.

`Diagnosis.as_dict()` is the JSON the CLI prints with `--json`; its shape is `SCHEMA` (version
`SCHEMA_VERSION`), documented here and pinned by tests: adding a field bumps the version.
`Diagnosis.text()` is the human report (verdict, then one line per check with its evidence).

Knows nothing about models, checkpoints or how the numbers were measured (the phases of run.py
do that).
"""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field

from eagle_nb.experiment import faults as F

SCHEMA_VERSION = 7
STATUSES = ("pass", "warn", "fail", "skip")

# field -> meaning; nested objects list their own fields. The JSON carries exactly these keys.
SCHEMA = {
    "schema_version": "int, bumped whenever a field is added, removed or renamed",
    "verdict": {
        "cause": "name of the most likely fault, 'healthy', 'engine' (greedy observations of one "
                 "pair disagree), or 'undetermined'",
        "summary": "one sentence a user can act on",
        "fix": "what to change (empty when healthy)",
        "confidence": "'high' | 'medium' | 'low'",
        "basis": "'static' (a check failed), 'log' (an engine error was recognised), "
                 "'observation' (ranked against measured profiles), 'probe', 'signature' (the "
                 "target could not run: ranked against the catalogue's measured fault signatures), "
                 "'recording' (signatures relative to a healthy tau replayed from a recording), "
                 "'observations' (several observations disagree), or 'none'",
        "also_consistent": "other fault names that explain the observation about as well",
    },
    "checks": [{
        "id": "stable check name (e.g. 'd2t', 'aux-ids', 'fc-width')",
        "status": "'pass' | 'warn' | 'fail' | 'skip'",
        "title": "what was checked",
        "evidence": "what was found: keys, shapes, ids, values",
        "faults": "fault names this check is evidence for when it does not pass",
        "fix": "what to change, when status is warn or fail",
        "data": "the numbers behind the evidence, where a figure draws them (train-accuracy: "
                "{'kind', 'trained', 'files', 'source'}), else {}",
    }],
    "hypotheses": [{
        "fault": "fault name, or 'healthy'",
        "story": "what goes wrong, in one sentence",
        "reference": "public report (docs/faults.md and its PRs/issues)",
        "fix": "what to change",
        "predicted": "{'depth', 'tau', 'tau_se', 'per_position', 'per_position_se', 'prompt_taus'} "
                     "measured by the kit's loop on this pair with the fault switched on (null: "
                     "crash-only)",
        "distance": "RMS z-score between prediction and observation (null: no observation)",
        "weight": "share of exp(-z^2/2) likelihood among all hypotheses (null: no observation)",
        "static_evidence": "ids of checks that point at this fault",
        "ruled_out_by": "id of a passing check showing the files cannot have this fault, or null",
        "kind": "what the hypothesis is: 'measured' (switched on and measured on this pair), "
                "'signature' (the catalogue's measured signature), 'serving path (signature of X)', "
                "'crash-only', or 'not measured' (static evidence only)",
        "serving_check": "what to check on the serving side (engine class, release, a shape to "
                         "print), or ''",
        "ranked_by": "why the hypothesis is at its place in the list: its z-score, a passing check "
                     "that rules it out, a check that points at it (serving path), its step in the "
                     "engine's data flow, or what named it (version 4)",
    }],
    "probes": [{
        "name": "what was tried (e.g. 'layer ids +1', 'target embedding')",
        "tau": "tau with the probe's change",
        "baseline_tau": "tau of the checkpoint as written",
        "better": "true when the change clearly raises tau: paired per-prompt gain > 3 SE and > 0.1",
        "message": "the finding in words",
    }],
    "observation": "null, or engines/observation.py `Observation`: 'source', 'tau', 'depth', "
                   "'per_position', 'engine', 'crash_lines', 'lines', 'unparsed', 'tau_se', "
                   "'depth_note', and (version 7) 'per_request_tau' (each request's tau, from a "
                   "file of responses with per-request metrics; else null)",
    "inputs": "{'target', 'drafter', 'depth', 'prompts', 'max_new_tokens', 'temperature'}",
    "notes": "list of strings: what was skipped and why",
    "workload": "null, or with a prompt file given (version 5) the user's requests as sent "
                "(conditions/workload_summary.py `Workload`): 'source', 'requests', 'sampled', "
                "'measured', 'template' (the target tokenizer's: chatml | other | none | unknown), "
                "'forms' (chat, raw, rendered, rendered-no-generation-prompt, rendered-unparsed: "
                "counts), 'system_turns', 'conditions' ({name: why it was measured}), 'new_tokens', "
                "'depth', 'lengths', 'target_limit', 'drafter_limit', 'context' (check_context), "
                "'past_target' ([request number, tokens]: not measured), 'warnings', 'coverage' "
                "(Coverage, per language), 'loops' (LoopReport), 'lines' (the report in words)",
    "waterfall": "null, or (version 6) where the acceptance goes (doctor/waterfall.py): 'depth', "
                 "'steps' ([{'name', 'tau', 'delta' (tau minus the step before's; null first), "
                 "'source' (what measured it)}], in order: training's implied tau, the files "
                 "teacher-forced, the prompts as trained, each serving condition as served, the "
                 "engine), 'not_measured' ([step, why]), 'lines' (the table in words)",
}


@dataclass
class Check:
    id: str
    status: str
    title: str
    evidence: str
    faults: list[str] = field(default_factory=list)
    fix: str = ""
    data: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"check {self.id}: status {self.status!r} not in {STATUSES}")
        for name in self.faults:          # every fault a check names is a registry entry
            F.entry(name)

    @classmethod
    def of(cls, cid, status, title, evidence, faults=(), fix="") -> "Check":
        """A check whose faults are kept only when it warns or fails (a pass is evidence of none)."""
        return cls(cid, status, title, evidence, list(faults) if status in ("warn", "fail") else [], fix)


@dataclass
class Hypothesis:
    fault: str
    story: str
    reference: str
    fix: str
    predicted: dict | None = None
    distance: float | None = None
    weight: float | None = None
    static_evidence: list[str] = field(default_factory=list)
    ruled_out_by: str | None = None
    kind: str = ""
    serving_check: str = ""
    ranked_by: str = ""


@dataclass
class Probe:
    name: str
    tau: float
    baseline_tau: float
    better: bool
    message: str


@dataclass
class Verdict:
    cause: str
    summary: str
    fix: str
    confidence: str
    basis: str
    also_consistent: list[str] = field(default_factory=list)


@dataclass
class Diagnosis:
    verdict: Verdict
    checks: list[Check]
    hypotheses: list[Hypothesis] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)
    observation: dict | None = None
    inputs: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    workload: dict | None = None
    waterfall: dict | None = None

    @property
    def healthy(self) -> bool:
        return self.verdict.cause == F.HEALTHY

    def check(self, check_id: str) -> Check:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(f"no check {check_id!r}; checks: {[c.id for c in self.checks]}")

    def as_dict(self) -> dict:
        d = asdict(self)
        return {"schema_version": SCHEMA_VERSION, **d}

    def to_json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=str)

    def text(self) -> str:
        v = self.verdict
        lines = [f"VERDICT: {v.summary}", f"  cause: {v.cause}   confidence: {v.confidence} "
                 f"(basis: {v.basis})"]
        if v.fix:
            lines.append(f"  fix: {v.fix}")
        if v.also_consistent:
            lines.append(f"  also consistent with: {', '.join(v.also_consistent)}")
        plan = [n.removeprefix("plan: ") for n in self.notes if n.startswith("plan: ")]
        lines += ["", "PLAN", *[f"  {n}" for n in plan]] if plan else []
        if self.workload:
            lines += ["", "WORKLOAD", *[f"  {n}" for n in self.workload["lines"]]]
        if self.waterfall:
            lines += ["", f"WHERE THE ACCEPTANCE GOES (tau at depth {self.waterfall['depth']})",
                      *[f"  {n}" for n in self.waterfall["lines"]]]
        lines.append("")
        lines.append("CHECKS")
        for c in self.checks:
            lines.append(f"  [{c.status.upper():4}] {c.id:<14} {c.title}: {c.evidence}")
            if c.status in ("warn", "fail") and c.fix:
                lines.append(f"  {'':6} {'':14} fix: {c.fix}")
        if self.probes:
            lines += ["", "PROBES"]
            lines += [f"  {'*' if p.better else ' '} {p.message}" for p in self.probes]
        if self.hypotheses:
            lines += ["", "HYPOTHESES (ranked)" if self.observation else "PREDICTED PROFILES"]
            for h in self.hypotheses:
                lines.append(f"  {h.fault:<28}{_score(h)}  {_profile(h)}  [{h.kind or 'measured'}]"
                             + (f"  (ruled out: {h.ruled_out_by} passes)" if h.ruled_out_by else ""))
                if h.ranked_by and not h.ruled_out_by and not h.ranked_by.startswith("z "):
                    lines.append(f"  {'':28}  ranked here: {h.ranked_by}")      # not by z alone
                if h.serving_check and not h.ruled_out_by:
                    lines.append(f"  {'':28}  serving-side check: {h.serving_check}")
        if self.observation:
            o = self.observation
            per = o.get("per_position")
            lines += ["", f"OBSERVED ({o['source']}): tau {o['tau']:.2f} at depth {o['depth']}"
                      + (f" ({o['depth_note']})" if o.get("depth_note") else "")
                      + (f", per-position {' / '.join(f'{x:.2f}' for x in per)}" if per else "")]
            lines += [f"  engine error: {ln}" for ln in o.get("crash_lines") or []]
            if o.get("per_request_tau"):
                lines.append("  " + per_request_line(o["per_request_tau"]))
        lines += [f"note: {n}" for n in self.notes if not n.startswith("plan: ")]
        return "\n".join(lines)


def per_request_line(taus) -> str:
    """Each request's tau in one line: median, range and count."""
    return (f"per-request tau: median {statistics.median(taus):.2f}, range {min(taus):.2f}-"
            f"{max(taus):.2f} over {len(taus)} request{'s' * (len(taus) != 1)}")


def _score(h: Hypothesis) -> str:
    return "" if h.distance is None else f"  z {h.distance:5.2f}  w {h.weight:.2f}"


def _profile(h: Hypothesis) -> str:
    p = h.predicted
    if p is None:
        return "crash only" if h.kind == "crash-only" else "no prediction"
    if "tau_range" in p:
        (lo, hi), (s_lo, s_hi) = p["tau_range"], p["share_of_healthy"]
        return f"tau {lo:.2f}-{hi:.2f} ({100 * s_lo:.0f}-{100 * s_hi:.0f}% of healthy)"
    return (f"tau {p['tau']:.2f} ± {p['tau_se']:.2f}, per-position "
            + " / ".join(f"{x:.2f}" for x in p["per_position"]))
