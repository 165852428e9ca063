"""Where the acceptance goes (doctor/waterfall.py): the steps from training's accuracy to the
engine's τ, each measured, in order, with its change from the step before. Pure function on
hand-made numbers (order, deltas, the τ an accuracy implies, unmeasured steps named and never
filled in); the served chain's combined run on the code pair (and a combination that cannot run,
named); the doctor's report and JSON on the code pair with a workload sent between ChatML markers;
the figure, one bar per step."""
from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from eagle_nb.conditions.templates import CHATML
from eagle_nb.conditions.workload_summary import CONTEXT, MISMATCH, RAW
from eagle_nb.doctor import waterfall as W
from eagle_nb.doctor.diagnosis import SCHEMA, SCHEMA_VERSION
from eagle_nb.doctor.measure import served_runs
from eagle_nb.doctor.run import doctor
from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.io.paths import CODE_DRAFTER
from eagle_nb.io.train_logs import CHAINED, INDEPENDENT
from eagle_nb.views.doctor_plots import plot_waterfall
from helpers import code_pair, code_prompts, legibility_problems

KW = dict(depth=4, max_new_tokens=16, progress=False)


def full(**over):
    kw = dict(training=(CHAINED, [0.8, 0.6, 0.4, 0.2, 0.1], "train.log"),
              files=(CHAINED, [0.7, 0.5, 0.3, 0.1], "the one pass"), healthy=(2.4, "the one pass"),
              served=[((MISMATCH,), 1.9, "as sent"), ((MISMATCH, CONTEXT), 1.5, "together")],
              observed=(1.2, "vllm.log"))
    return W.waterfall(4, **{**kw, **over})


def test_steps_come_in_order_with_their_deltas():
    """Training 1 + 0.8 + 0.6 + 0.4 + 0.2 = 3.0 (the fifth logged step is past depth 4), the files
    1 + 1.6 = 2.6, then the measured taus; each delta is the step minus the one before."""
    w = full()
    assert [s.name for s in w.steps] == [W.TRAINING, W.FILES, W.AS_TRAINED,
                                         f"{W.TEMPLATE_STEP}: {MISMATCH}", f"+ {W.CONTEXT_STEP}: {CONTEXT}",
                                         W.ENGINE]
    assert [round(s.tau, 6) for s in w.steps] == [3.0, 2.6, 2.4, 1.9, 1.5, 1.2]
    assert w.steps[0].delta is None
    assert [round(s.delta, 6) for s in w.steps[1:]] == [-0.4, -0.2, -0.5, -0.4, -0.3]
    assert not [n for n, _ in w.not_measured if n in {s.name for s in w.steps}]
    lines = w.lines()
    assert "-0.50" in lines[4] and lines[0].startswith("step")


def test_the_deltas_add_up_to_every_step():
    """Property: from the first step's τ, the running sum of the deltas gives every step's τ (it
    fails if a delta were taken from the first step, from the healthy one, or with its sign
    flipped), on random inputs with random steps left out."""
    rng = random.Random(0)
    for _ in range(200):
        acc = sorted((rng.random() for _ in range(rng.randint(1, 6))), reverse=True)
        kw = dict(training=(rng.choice([CHAINED, INDEPENDENT]), acc, "log") if rng.random() < 0.7 else None,
                  healthy=(1 + 3 * rng.random(), "one pass") if rng.random() < 0.7 else None,
                  served=[((MISMATCH,), 1 + 3 * rng.random(), "x")] if rng.random() < 0.5 else [],
                  observed=(1 + 3 * rng.random(), "log") if rng.random() < 0.7 else None)
        w = W.waterfall(rng.randint(1, 8), **kw)
        run = w.steps[0].tau if w.steps else None
        for s in w.steps[1:]:
            run += s.delta
            assert s.tau == pytest.approx(run)
        named = {s.name for s in w.steps} | {n for n, _ in w.not_measured}
        assert {W.TRAINING, W.FILES, W.ENGINE} <= named


def test_the_tau_an_accuracy_implies():
    """Chained accuracies are summed; acc_j are chained as a product; a log shorter than the depth
    sums what it has and says it is a lower bound."""
    assert W.implied_tau([0.8, 0.6], CHAINED, 4) == (pytest.approx(2.4), 2)
    assert W.implied_tau([0.8, 0.5, 0.5], INDEPENDENT, 2) == (pytest.approx(1 + 0.8 + 0.4), 2)
    w = W.waterfall(4, training=(INDEPENDENT, [0.5, 0.5], "log"))
    assert w.steps[0].tau == pytest.approx(1.75) and "lower bound" in w.steps[0].source


def test_a_step_not_measured_is_left_out_and_named():
    """No training log, no observation: those steps are absent and named with why; a served
    combination that could not run is named with its reason and nothing after it is shown."""
    w = W.waterfall(4, healthy=(2.4, "one pass"),
                    served=[((MISMATCH,), 1.9, "as sent"), ((MISMATCH, RAW), None, "ValueError: both set template")],
                    why={W.PRECISION_STEP: "not told"})
    assert [s.name for s in w.steps] == [W.AS_TRAINED, f"{W.TEMPLATE_STEP}: {MISMATCH}"]
    gone = dict(w.not_measured)
    assert set(gone) == {W.TRAINING, W.FILES, W.ENGINE, f"+ {W.TEMPLATE_STEP}: {RAW}", W.PRECISION_STEP}
    assert "--train-log" in gone[W.TRAINING] and "ValueError" in gone[f"+ {W.TEMPLATE_STEP}: {RAW}"]
    assert "not measured: precision as served: not told" in w.lines()


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def test_the_served_chain_runs_its_conditions_together(pair):
    """The first served condition's τ is its own measured profile; the next is run with it, in
    one setting; two conditions that set the same wiring field are named as not measurable."""
    prompts = code_prompts(2)
    st = SimpleNamespace(workload=SimpleNamespace(served=lambda: [MISMATCH, "loop-inflated-workload"]),
                         profiles={MISMATCH: SimpleNamespace(tau=1.7), "loop-inflated-workload": None},
                         served=[], k=4, temperature=0.0, max_new_tokens=8)
    served_runs(st, pair, prompts)
    (first, t1, _), (both, t2, why) = st.served
    assert first == (MISMATCH,) and t1 == 1.7 and both == (MISMATCH, "loop-inflated-workload")
    assert t2 is not None and 1 <= t2 <= 5 and why == ""
    st.workload.served, st.profiles[RAW], st.served = (lambda: [MISMATCH, RAW]), None, []
    served_runs(st, pair, prompts)
    assert st.served[1][1] is None and "template" in st.served[1][2]


def test_the_doctor_reports_where_the_acceptance_goes(pair, tmp_path):
    """On the code pair with four requests sent between ChatML markers, typed training accuracy and
    an engine's τ: the text report has the table, the JSON the same steps (schema version 6 on), each
    τ the doctor measured (the healthy and the condition's hypotheses); the figure has a bar a step."""
    f = tmp_path / "chatml.jsonl"
    f.write_text("".join(json.dumps({"prompt": CHATML.format(text=p)}) + "\n" for p in code_prompts(4)))
    d = doctor(CODE_DRAFTER, pair=pair, prompts=str(f), faults=(), observed_tau=1.5,
               train_acc="0.7,0.69,0.69,0.67", **KW)
    text = d.text()
    assert "WHERE THE ACCEPTANCE GOES (tau at depth 4)" in text
    j = json.loads(d.to_json())
    assert j["schema_version"] == SCHEMA_VERSION >= 6 and set(j) == set(SCHEMA)
    steps = j["waterfall"]["steps"]
    names = [s["name"] for s in steps]
    assert names == [W.TRAINING, W.FILES, W.AS_TRAINED, f"{W.TEMPLATE_STEP}: {MISMATCH}", W.ENGINE], names
    taus = {h.fault: h.predicted["tau"] for h in d.hypotheses if h.predicted}
    assert steps[2]["tau"] == taus[HEALTHY] and steps[3]["tau"] == taus[MISMATCH] and steps[4]["tau"] == 1.5
    assert all(line in text for line in j["waterfall"]["lines"])
    gone = dict(j["waterfall"]["not_measured"])
    assert set(gone) == {W.CONTEXT_STEP, W.PRECISION_STEP, W.COVERAGE_STEP}
    fig = plot_waterfall(d)
    assert len(fig.axes[0].patches) == len(steps) and legibility_problems(fig) == []
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == names


def test_the_figure_has_one_bar_per_step_and_refuses_none():
    w = full().as_dict()
    fig = plot_waterfall(w)
    assert type(fig).__name__ == "Figure" and len(fig.axes[0].patches) == len(w["steps"]) == 6
    with pytest.raises(ValueError, match="no waterfall"):
        plot_waterfall(SimpleNamespace(waterfall=None))


def test_static_only_keeps_what_was_reported_and_names_the_rest(tmp_path):
    """Nothing runs (--static-only): the waterfall is training's implied τ and the engine's, and
    every step between is named as not measured, none claimed to be absent from the serving."""
    from eagle_nb.io.paths import CODE_TARGET
    f = tmp_path / "chatml.jsonl"
    f.write_text("".join(json.dumps({"prompt": CHATML.format(text=p)}) + "\n" for p in code_prompts(2)))
    d = doctor(CODE_DRAFTER, CODE_TARGET, prompts=str(f), dynamic=False, observed_tau=1.5,
               train_acc="0.7,0.69", progress=False)
    w = d.waterfall
    assert [s["name"] for s in w["steps"]] == [W.TRAINING, W.ENGINE]
    gone = dict(w["not_measured"])
    assert gone[W.TEMPLATE_STEP] == gone[W.CONTEXT_STEP] == "the pair did not run here"
    assert {W.FILES, W.AS_TRAINED} <= set(gone)
