"""Tests for the doctor's tables (eagle_nb.views.doctor_plots): what notebook 06 shows beside each
hypothesis. Hand-made diagnoses; CPU, no model.
"""
from __future__ import annotations

from types import SimpleNamespace

from eagle_nb.experiment import faults as F
from eagle_nb.views import doctor_plots


def _hyp(fault, evidence=(), ruled_out_by=None):
    return SimpleNamespace(fault=fault, static_evidence=list(evidence), ruled_out_by=ruled_out_by,
                           predicted={"tau": 1.5, "tau_se": 0.1, "per_position": [0.3, 0.1]},
                           distance=1.0, weight=0.2)


def test_hypotheses_table_says_what_the_static_checks_found():
    """On files that pass every check (notebook 06, section 2) no hypothesis has static evidence,
    yet the column says something in every row: a check that points at the fault, the passing
    check that rules it out, the fault's own checks that pass without deciding, or that no check
    of the files can see it."""
    undecided = next(f for f in F.FAULTS if f.static.checks and not f.static.rules_out)
    unseen = next(f for f in F.FAULTS if not f.static.checks and f.kind != F.CRASH)
    checks = [SimpleNamespace(id=c, status="pass") for c in ("keys", "embed-tokens", *undecided.static.checks)]
    checks[0].status = "fail"
    d = SimpleNamespace(checks=checks, hypotheses=[
        _hyp("healthy"), _hyp("layers0-keys-dropped", evidence=["keys"]),
        _hyp("embed-random", ruled_out_by="embed-tokens"), _hyp(undecided.name), _hyp(unseen.name)])
    col = doctor_plots.hypotheses_table(d)["static checks of the files"].tolist()
    assert col == ["-", "points at it: keys", "ruled out: embed-tokens passes",
                   ", ".join(f"{c} pass" for c in undecided.static.checks) + " (does not decide)",
                   "no check of the files sees it"]
