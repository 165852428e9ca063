"""The doctor's static part: what a drafter checkpoint and a target's config say, in seconds, with
no generation and without loading the target's weights (its config and, when asked, its input
embedding are read lazily through `io.target_parts`, via target_meta.py).

`run_static` runs every check (checks_drafter.py: the checkpoint itself; checks_target.py: the
drafter against the target). Each returns a `diagnosis.Check` (pass / warn / fail / skip) with the
evidence and the registry faults it points at; which check sees which fault, and what a passing
check rules out, are fields of each fault's registry entry (`experiment.faults`, `static`).

Knows nothing about speculation or ranking.
"""
from __future__ import annotations

from pathlib import Path

from eagle_nb.doctor import checks_drafter as D
from eagle_nb.doctor import checks_target as T
from eagle_nb.doctor.diagnosis import Check
from eagle_nb.doctor.target_meta import TargetMeta, target_meta

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
