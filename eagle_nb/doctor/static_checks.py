"""The doctor's second phase, static: what a drafter checkpoint and a target's config say, in
seconds, with no generation and without loading the target's weights (its config and, when asked,
its input embedding are read lazily through `io.target_parts`, via target_meta.py).

`static` asks the format registry (`checkpoints.registry`) what the drafter is: a format with
checks of its own (GGUF) gives its check rows, and the reference loop cannot run it; a drafter
directory gets `run_static`, every check (checks_drafter.py: the checkpoint itself;
checks_target.py: the drafter against the target). Each is a `diagnosis.Check` (pass / warn /
fail / skip) with the evidence and the registry faults it points at; which check sees which fault,
and what a passing check rules out, are fields of each fault's registry entry
(`experiment.faults`, `static`). Knows nothing about speculation or ranking.
"""
from __future__ import annotations

from pathlib import Path

from eagle_nb.checkpoints import registry
from eagle_nb.doctor import checks_drafter as D
from eagle_nb.doctor import checks_target as T
from eagle_nb.doctor import observations
from eagle_nb.doctor.diagnosis import Check
from eagle_nb.doctor.target_meta import TargetMeta, target_meta
from eagle_nb.io.weight_files import CheckpointError

# Every check id the doctor can report (the registry's `static.checks` name some of them).
CHECK_IDS = ("format", "keys", "d2t", "aux-ids", "fc-width", "embed-tokens", "lm-head",
             "config-flags", "rope", "dtype", "target-layout", "vocab", "checkpoint", "dtype-range")


def run_static(drafter, target=None) -> tuple[list[Check], object, dict, TargetMeta | None]:
    """All static checks. Returns (checks, validate.Report, renamed state dict, target meta)."""
    from eagle_nb.checkpoints.detect import read_config
    from eagle_nb.checkpoints.inspect import inspect_checkpoint
    from eagle_nb.checkpoints.validate import PROBLEM
    drafter = Path(drafter)
    tmeta = target_meta(target)
    tcfg = None
    if tmeta is not None:
        from types import SimpleNamespace
        tcfg = SimpleNamespace(**{k: tmeta.get(k) for k in ("vocab_size", "hidden_size", "num_hidden_layers")})
    rep, state = inspect_checkpoint(drafter, tcfg, scan=True)   # every value, streamed
    raw = read_config(drafter)
    checks = [D.check_format(rep, raw), D.check_keys(rep), D.check_d2t(rep, drafter, state),
              T.check_aux_ids(rep, raw, tmeta), D.check_fc_width(rep, state, tmeta),
              T.check_embed(rep, state, tmeta), D.check_lm_head(rep, state), D.check_flags(rep, raw),
              T.check_rope(rep, tmeta), D.check_dtype(rep, state), T.check_target_layout(tmeta),
              T.check_vocab(rep, tmeta)]
    rest = [f.message for f in rep.findings if f.level == PROBLEM and f not in D.shown(rep, checks)]
    if rest:
        checks.append(D.ck("checkpoint", "fail", "other checkpoint problems", "; ".join(rest)))
    return checks, rep, state, tmeta


def static(st) -> None:
    """Fill `checks`, `fmt`, `rep`, `state`, and `measurable` / `unreadable` when it cannot run;
    several observations add the check that they agree (observations.py)."""
    try:
        fmt = registry.of_path(st.drafter)
        st.fmt = fmt.name
        if fmt.checks is not None:                      # a format with checks of its own
            tm = target_meta(st.target_path)
            st.checks = [Check.of(*row) for row in fmt.checks(st.drafter, tm.config if tm else None)]
        else:
            st.checks, st.rep, st.state, _ = run_static(st.drafter, st.target_path)
    except CheckpointError as e:
        st.unreadable, st.measurable = str(e), False
        st.checks = [Check("checkpoint", "fail", "checkpoint readable", str(e), [], "fix the file named above")]
        return
    if not fmt.runs:
        st.measurable = False
        st.notes.append(f"{fmt.name.upper()} drafter: static checks only; pass the HF drafter for "
                        "the measured part")
    elif st.dynamic and not st.rep.ok:
        st.measurable = False
        st.notes.append("dynamic part skipped: the checkpoint does not load strictly (see failed checks)")
    agree = observations.agreement(st.observations)
    if agree is not None:
        st.checks.append(agree)
