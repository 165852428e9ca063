"""Where the acceptance goes: the steps from what training reported to what the engine accepts,
each a τ the doctor measured (or one an accuracy implies), in order, with its change from the step
before and what measured it (docs/doctor.md, "Where the acceptance goes").

The steps, each present only when measured (`waterfall`, pure):
  1. training: the τ the trainer's logged per-step accuracy implies (`implied_tau`);
  2. the files, teacher-forced on the prompts: the same, from the one pass's accuracy of the same
     kind on the files (the training check, training.py), so 1 -> 2 is the prompts and the files;
  3. the prompts as trained: τ of the healthy one pass (on a workload, its requests in the form
     the drafter was trained on), so 2 -> 3 is drafting on its own guesses instead of the target's;
  4. one step per serving condition the requests are served under (their template as sent, the
     context they need: `Workload.served`), each added to those before it and run together
     (measure.served_runs);
  5. the engine: the τ it reported.
A step without its measurement is left out and named in `not_measured` with why; nothing is
estimated in its place. `from_state` reads the doctor's state; nothing here runs a model.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from eagle_nb.conditions import registry as C
from eagle_nb.doctor.training import CHECK_ID as TRAIN_CHECK
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.io.train_logs import CHAINED

TRAINING = "training (its log)"
FILES = "the files, teacher-forced"
AS_TRAINED = "your prompts, as trained"
AS_GIVEN = "the prompts measured, as given"
ENGINE = "the engine (observed)"
TEMPLATE_STEP, CONTEXT_STEP = "template as sent", "context as served"
PRECISION_STEP, COVERAGE_STEP = "precision as served", "draft-vocabulary coverage"
FAMILY_STEP = {C.TEMPLATE: TEMPLATE_STEP, C.CONTEXT: CONTEXT_STEP, C.PRECISION: PRECISION_STEP}


@dataclass
class Step:
    name: str
    tau: float                  # τ measured, or implied by an accuracy (`implied_tau`)
    delta: float | None         # tau minus the step before's (None: the first step)
    source: str                 # what measured it


@dataclass
class Waterfall:
    depth: int
    steps: list[Step] = field(default_factory=list)
    not_measured: list[tuple[str, str]] = field(default_factory=list)   # (step, why)

    def lines(self) -> list[str]:
        """The table, one line a step, then what was not measured."""
        out = [f"{'step':<44}{'tau':>6}{'change':>8}  measured by"]
        for s in self.steps:
            d = "" if s.delta is None else f"{s.delta:+.2f}"
            out.append(f"{s.name:<44}{s.tau:6.2f}{d:>8}  {s.source}")
        return out + [f"not measured: {name}: {why}" for name, why in self.not_measured]

    def as_dict(self) -> dict:
        return {**asdict(self), "lines": self.lines()}


def implied_tau(values, kind: str, depth: int) -> tuple[float, int]:
    """(τ, steps used): tau = 1 + sum_{j=1..n} c_j with n = min(depth, len(values)), c_j the
    chained accuracy of step j (draft steps 1..j all right). A speculators log gives c_j itself
    (full_acc_j); an acc_j log (SpecForge, SafeAILab EAGLE: step j right whatever came before) is
    chained as c_j = acc_1 * ... * acc_j, which assumes the steps fail independently."""
    n = min(depth, len(values))
    chained = list(values[:n]) if kind == CHAINED else [math.prod(values[:j + 1]) for j in range(n)]
    return 1.0 + sum(chained), n


def accuracy_source(kind: str, n: int, depth: int, where: str) -> str:
    how = "full_acc_j summed" if kind == CHAINED else "acc_j chained as a product (independent steps)"
    short = f"; the log has {n} steps, not {depth}: a lower bound" if n < depth else ""
    return f"{where}: 1 + sum of chained accuracy over steps 1..{n}, {how}{short}"


def waterfall(depth: int, *, training=None, files=None, healthy=None, served=(), observed=None,
              why=None) -> Waterfall:
    """The steps that were measured, in order. `training` / `files`: (kind, per-step accuracy,
    where from); `healthy`: (τ, how measured[, step name]); `served`: [(conditions, τ or None, how measured or
    why not)], each with those before it; `observed`: (τ, where from); `why`: {step: why it was
    not measured} for the steps absent (a default reason otherwise)."""
    why = dict(why or {})
    w, rows = Waterfall(depth), []
    for name, acc in ((TRAINING, training), (FILES, files)):
        if acc is not None:
            tau, n = implied_tau(acc[1], acc[0], depth)
            rows.append((name, tau, accuracy_source(acc[0], n, depth, acc[2])))
        else:
            w.not_measured.append((name, why.get(name, "no training accuracy given (--train-log)")))
    if healthy is not None:
        rows.append((healthy[2] if len(healthy) > 2 else AS_TRAINED, healthy[0], healthy[1]))
    else:
        w.not_measured.append((AS_TRAINED, why.get(AS_TRAINED, "the pair did not run here")))
    for names, tau, how in served:
        family = C.entry(names[-1]).family
        step = f"{'+ ' if len(names) > 1 else ''}{FAMILY_STEP.get(family, family)}: {names[-1]}"
        if tau is None:
            w.not_measured.append((step, how))
            break
        rows.append((step, tau, how))
    if observed is not None:
        rows.append((ENGINE, observed[0], observed[1]))
    else:
        w.not_measured.append((ENGINE, why.get(ENGINE, "no observation given (--observed, --observed-tau)")))
    w.not_measured += [(k, v) for k, v in why.items() if k not in (TRAINING, FILES, AS_TRAINED, ENGINE)]
    prev = None
    for name, tau, source in rows:
        w.steps.append(Step(name, tau, None if prev is None else tau - prev, source))
        prev = tau
    return w


def from_state(st) -> Waterfall | None:
    """The doctor's waterfall from what its phases measured (None: no step was measured)."""
    k, why = st.k, {}
    training = files = healthy = observed = None
    if st.train is not None:
        training = (st.train.kind, st.train.values, f"{st.train.source}")
        check = next((c for c in st.checks if c.id == TRAIN_CHECK and c.data), None)
        if check is not None:
            files = (check.data["kind"], check.data["files"],
                     f"the one pass on {st.inputs.get('prompts')} prompts x {st.max_new_tokens} tokens")
        else:
            why[FILES] = "the files were not run on the prompts here"
    measured = HEALTHY in st.profiles and not st.distances          # not the catalogue's signature
    if measured:
        how = "one pass" if st.temperature == 0 else "live loop"
        on = ("of your requests in the form the drafter was trained on" if st.workload is not None else
              "of the kit's evaluation prompts (no --prompts FILE)" if st.prompts is None else "prompts, as given")
        healthy = (st.profiles[HEALTHY].tau, f"the {how} on {st.inputs.get('prompts')} {on} x "
                                             f"{st.max_new_tokens} tokens",
                   AS_TRAINED if st.workload is not None else AS_GIVEN)
    elif st.distances:
        why[AS_TRAINED] = "the target cannot run here (the ranking used the catalogue's signatures)"
    served = [(names, tau, (f"the one pass with {', '.join(names)} applied together" if len(names) > 1
                            else "the one pass as sent") if tau is not None else how)
              for names, tau, how in st.served]
    why.update(serving_gaps(st, served))
    if st.obs is not None and st.obs.tau == st.obs.tau:
        at = "" if st.obs.depth in (None, k) else f" at depth {st.obs.depth}, not {k}"
        observed = (st.obs.tau, f"{st.obs.source}{at}")
    w = waterfall(k, training=training, files=files, healthy=healthy, served=served, observed=observed,
                  why=why)
    return w if w.steps else None


def serving_gaps(st, served) -> dict:
    """{serving step: why it is not in the waterfall} for the families a served step could be."""
    wl, has = st.workload, {C.entry(names[-1]).family for names, _, _ in served}
    out, ran = {}, HEALTHY in st.profiles and not st.distances
    wanted = {C.entry(n).family for n in wl.served()} if wl is not None else set()
    for family, step in ((C.TEMPLATE, TEMPLATE_STEP), (C.CONTEXT, CONTEXT_STEP)):
        if family in has:
            continue
        if wl is None:
            out[step] = "no prompt file (--prompts FILE): how your requests are sent is not known"
        elif st.recorded:
            out[step] = "a recording holds one served run: the workload's conditions are not run on it"
        elif not ran:
            out[step] = "the pair did not run here"
        elif family in wanted:
            out[step] = "its run failed or stopped the chain (see the notes and not measured above)"
        elif family == C.TEMPLATE:
            out[step] = ("your requests are sent in the form the drafter was trained on: no step"
                         if wl.template != "unknown" else "the target's tokenizer was not read")
        else:
            out[step] = ("every measured request fits the drafter's positions: no step" if wl.lengths
                         else "the requests' lengths are not known")
    out[PRECISION_STEP] = ("the doctor is not told the precision the target is served at; a precision "
                           "condition asked for (--condition) is ranked as a hypothesis, not a step")
    cov = (wl.coverage if wl is not None else None) or {}
    out[COVERAGE_STEP] = (f"inside '{AS_TRAINED}': that run drafts from the draft vocabulary "
                          f"({100 * cov['inside_share']:.1f}% of its continuation tokens inside)"
                          if "inside_share" in cov else "no workload run measured it")
    return out
