"""The shapes results come in: `RunResult` (one `Setting` over a prompt set) and `Sweep` (many
settings over the same prompts). Plots, live panels, the report switcher and the CLI consume only
these two.

Every metric shown comes from the one table in `metrics.METRICS`; the run-level rows (tokens/s,
lossless check) are the `RUN_FIELDS` here. Plain data: knows nothing about models or plotting.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from eagle_nb.experiment.setting import Setting
from eagle_nb.loop import metrics as M
from eagle_nb.loop.metrics import AcceptanceMetrics


@dataclass
class RunResult:
    setting: Setting
    prompts: list[str]
    outputs: list[str]
    stats: list                     # SpecStats per prompt
    metrics: AcceptanceMetrics
    wiring: dict = field(default_factory=dict)   # what the loop was given (faults.Wiring.describe)
    reference_match: list[bool] | None = None
    reference_s: float | None = None
    notes: list[str] = field(default_factory=list)
    computed_by: str = "live loop"   # or "one-pass" (loop/onepass.py: greedy chains, no timings)
    estimate: bool = False          # computed from teacher-forced dataset text (trainers' files)

    @property
    def label(self) -> str:
        return self.setting.label

    @property
    def new_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.stats)

    @property
    def spec_s(self) -> float:
        return sum(s.total_s for s in self.stats)

    @property
    def matches_target_greedy(self) -> bool | None:
        return None if self.reference_match is None else all(self.reference_match)

    @property
    def tokens_per_s(self) -> float | None:
        return self.new_tokens / self.spec_s if self.spec_s else None

    @property
    def reference_tokens_per_s(self) -> float | None:
        return self.new_tokens / self.reference_s if self.reference_s else None

    def loop_report(self, n: int = 6):
        """The share of this run's continuation tokens inside a repeated n-gram, per prompt and
        pooled, and tau on loop-free verify steps beside tau overall (conditions/repetition.py)."""
        from eagle_nb.conditions.repetition import loop_report
        return loop_report(self.stats, n)

    def summary(self) -> dict:
        """JSON-ready: the setting, what the loop was given, every metric, the run-level fields."""
        return {"setting": self.setting.as_dict(), "computed_by": self.computed_by,
                "tau_is_estimate": self.estimate, **self.wiring, "outputs": self.outputs,
                **M.summary(self.metrics), **{f: getattr(self, f) for f, _ in RUN_FIELDS},
                "notes": self.notes}

    def table_column(self) -> dict:
        col = M.table_column(self.metrics)
        for f, label in RUN_FIELDS:
            v = getattr(self, f)
            if v is not None and f != "reference_tokens_per_s":
                col[label] = round(v, 1) if isinstance(v, float) else v
        col["computed by"] = self.computed_by
        return col

    def report_text(self) -> str:
        lines = [f"setting: {self.setting.as_dict()}", f"computed by: {self.computed_by}",
                 *(["tau: ESTIMATE (teacher-forced dataset text, not the target's own output)"]
                   if self.estimate else []), f"given: {self.wiring}",
                 *[f"note: {n}" for n in self.notes], *M.report_lines(self.metrics)]
        for f, label in RUN_FIELDS:
            v = getattr(self, f)
            lines.append(f"{label}: {'-' if v is None else round(v, 1) if isinstance(v, float) else v}")
        return "\n".join(lines)


RUN_FIELDS = (("new_tokens", "new tokens"), ("matches_target_greedy", "output == target greedy"),
              ("tokens_per_s", "tokens/s (this machine)"),
              ("reference_tokens_per_s", "target-only tokens/s (this machine)"))


def metrics_frame(results: dict) -> pd.DataFrame:
    """Every metric, one column per named RunResult ({name: RunResult})."""
    return pd.DataFrame({name: r.table_column() for name, r in results.items()})


class Sweep:
    """RunResults of many settings over one prompt set, addressable by setting."""

    def __init__(self, results):
        self.results: dict[Setting, RunResult] = {r.setting: r for r in results}

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self):
        return iter(self.results.values())

    def __getitem__(self, setting: Setting) -> RunResult:
        return self.results[setting]

    def __contains__(self, setting) -> bool:
        return setting in self.results

    @property
    def depths(self) -> list[int]:
        return sorted({s.depth for s in self.results})

    @property
    def temperatures(self) -> list[float]:
        return sorted({s.temperature for s in self.results})

    @staticmethod
    def curve_name(s: Setting) -> str:
        return f"{s.label}, T={s.temperature:g}"

    def curves(self) -> dict[str, dict[int, RunResult]]:
        """{"<faults>, T=t": {k: RunResult}}: one curve over depth per (faults, temperature)."""
        out: dict = {}
        for s, r in self.results.items():
            out.setdefault(self.curve_name(s), {})[s.depth] = r
        return out

    def at(self, depth: int, temperature: float | None = None) -> dict[str, RunResult]:
        """{"<faults>, T=t": RunResult} at one depth (and temperature, if given)."""
        return {self.curve_name(s): r for s, r in self.results.items() if s.depth == depth
                and (temperature is None or s.temperature == temperature)}

    def by_label(self, depth: int, temperature: float) -> dict[str, RunResult]:
        """{faults label: RunResult} at one depth and temperature."""
        return {s.label: r for s, r in self.results.items()
                if s.depth == depth and s.temperature == temperature}

    def frame(self) -> pd.DataFrame:
        """One row per setting: the setting's fields and every metric of the table."""
        rows = []
        for s, r in self.results.items():
            row = {"label": s.label, **s.as_dict()}
            row.update({m.name: getattr(r.metrics, m.name) for m in M.METRICS})
            row.update({f: getattr(r, f) for f, _ in RUN_FIELDS})
            rows.append(row)
        return pd.DataFrame(rows)
