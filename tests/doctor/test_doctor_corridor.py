"""The doctor as a corridor (doctor/run.py): from the parsed flags to the verdict the call path
enters each phase's module once, in order; the measured and the no-target paths share one
evidence map, one `ruled_out` and one hypothesis builder (a crash fault a check names is
'crash-only' on both); and the verdict says why its first hypothesis leads when that is not the
nearest prediction."""
from __future__ import annotations

import collections
import inspect
import re
import shutil
import sys

import eagle_nb
from eagle_nb.cli.main import build_parser
from eagle_nb.doctor.diagnosis import Check
from eagle_nb.doctor.hypotheses import ruled_out
from eagle_nb.doctor.run import doctor
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET
from helpers import plant

PHASES = ["doctor.run", "doctor.state", "doctor.observe", "doctor.static_checks", "doctor.workload",
          "doctor.measure", "doctor.signatures", "doctor.hypotheses", "doctor.verdict", "doctor.diagnosis"]
CORRIDOR = {"eagle_nb.cli.doctor", "eagle_nb.doctor.run"}


def module_entries(argv) -> tuple[list[str], collections.Counter]:
    """(eagle_nb modules in the order the call path enters them, entries per module) of one CLI
    run, counted with sys.setprofile: a call from cli/doctor.py or doctor/run.py into another
    eagle_nb module is an entry (module and class bodies run by imports are not calls)."""
    a = build_parser().parse_args(argv)
    order, count = [], collections.Counter()

    def prof(frame, event, arg):
        if event != "call" or not frame.f_code.co_flags & inspect.CO_NEWLOCALS:
            return
        mod, caller = frame.f_globals.get("__name__", ""), frame.f_back
        while caller is not None and not caller.f_code.co_flags & inspect.CO_NEWLOCALS:
            caller = caller.f_back
        if mod.startswith("eagle_nb") and caller is not None and caller.f_globals.get("__name__") in CORRIDOR \
                and caller.f_globals["__name__"] != mod:
            order.append(mod.removeprefix("eagle_nb."))
            count[mod.removeprefix("eagle_nb.")] += 1
    sys.setprofile(prof)
    try:
        a.run(a)
    finally:
        sys.setprofile(None)
    return order, count


def test_the_call_path_enters_each_phase_once(capsys):
    """`eagle-nb doctor --observed-tau 1.05 --static-only` on the code pair: from the parsed flags
    the call path enters at most 12 modules (cli/doctor.py included), each once, in the corridor's
    order."""
    order, count = module_entries(["doctor", "--drafter", str(CODE_DRAFTER_SPECULATORS), "--target",
                                   str(CODE_TARGET), "--observed-tau", "1.05", "--depth", "4",
                                   "--static-only"])
    capsys.readouterr()
    assert order == PHASES and set(count.values()) == {1}, (order, count)
    assert len(count) + 1 <= 12                      # + cli/doctor.py itself


def test_ruled_out_is_one_rule_from_the_registry():
    """A passing deciding check rules a fault out where its entry says so; layers0-keys-dropped
    happens only to a speculators checkpoint, so a passing 'keys' check rules it out for the others."""
    keys, lm = Check("keys", "pass", "keys", "ok"), Check("lm-head", "pass", "lm_head", "ok")
    assert ruled_out("lm-head-missing", [lm]) == "lm-head"
    assert ruled_out("layers0-keys-dropped", [keys], "sglang") == "keys"
    assert ruled_out("layers0-keys-dropped", [keys], "speculators") is None
    assert ruled_out("layers0-keys-dropped", [], "sglang") is None and ruled_out("healthy", [keys]) is None


def test_a_crash_fault_named_by_a_warning_is_crash_only_without_the_target(tmp_path):
    """Ids that include the last layer L make the aux-ids check warn 'fc-width-mismatch' (a crash
    entry of the registry); with a target that cannot run here the hypothesis is 'crash-only', as
    on the measured path (it was 'not measured' there before)."""
    drafter = plant(tmp_path, config=lambda c: c.update(eagle_aux_hidden_state_layer_ids=[2, 4, 8]))
    target = tmp_path / "t"
    shutil.copytree(CODE_TARGET, target, ignore=shutil.ignore_patterns("tokenizer*"))   # cannot run
    d = doctor(drafter, target, observed_tau=1.05, depth=4, progress=False)
    aux = d.check("aux-ids")
    assert aux.status == "warn" and "fc-width-mismatch" in aux.faults, aux
    assert d.verdict.basis == "signature"
    h = next(h for h in d.hypotheses if h.fault == "fc-width-mismatch")
    assert h.kind == "crash-only" and h.predicted is None and h.static_evidence == ["aux-ids"]
    assert "crash only" in d.text()


def test_the_verdict_says_why_its_first_hypothesis_leads(tmp_path):
    """The wrapper seed case (SGLang log, tau 1.05): wrapper-capture leads because the target-layout
    check points at it, though d2t-absolute fits the signature closer; the verdict and each
    leading hypothesis say so."""
    case = eagle_nb.build_seed_case("kimi-k2.5", tmp_path)
    d = doctor(case.drafter, case.target, observed_log=case.log, progress=False)
    top = d.hypotheses[0]
    assert d.verdict.cause == top.fault == "wrapper-capture"
    assert "the target-layout check points at it" in top.ranked_by
    why = re.search(r"wrapper-capture is first because a check of your files points at it; by signature "
                    r"alone d2t-absolute fits closer \(z ([0-9.]+) vs ([0-9.]+)\)", d.verdict.summary)
    assert why and float(why[1]) < float(why[2]), d.verdict.summary   # z values: the shipped catalogue's
    d2t = next(h for h in d.hypotheses if h.fault == "d2t-absolute")
    assert d2t.ranked_by.startswith("serving path, in the order data flows") and d2t.distance < top.distance
    assert "ranked here: serving path, the target-layout check points at it" in d.text()
