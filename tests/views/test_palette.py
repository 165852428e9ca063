"""The kit's one plotting convention (eagle_nb.views.palette): fault colours by registry position,
no colour or pyplot state outside the palette, and the doctor and engine figures drawn like the rest
(Figure built directly, legible at the size shown, healthy in healthy's colour).

CPU only; the figures are drawn from hand-made diagnoses, comparisons and engine log lines.
"""
from __future__ import annotations

import ast
import re
from types import SimpleNamespace

import helpers
import matplotlib
import pytest

from eagle_nb.experiment import faults as F
from eagle_nb.io.paths import REPO_ROOT
from eagle_nb.views import doctor_plots, engine_figures, palette

matplotlib.use("Agg")
VIEWS = REPO_ROOT / "eagle_nb" / "views"


def test_fault_colour_is_the_registry_position():
    """Each registered fault's colour is the palette entry at its registry position (distinct for
    every registered fault); healthy has healthy's colour; an unregistered name is a KeyError that
    lists the registered ones."""
    names = [f.name for f in F.FAULTS]
    assert [palette.fault_color(n) for n in names] == \
        [palette.FAULT_PALETTE[i % len(palette.FAULT_PALETTE)] for i in range(len(names))]
    assert len({palette.fault_color(n) for n in names}) == min(len(names), len(palette.FAULT_PALETTE))
    assert palette.fault_color(F.HEALTHY) == palette.HEALTHY_COLOR not in palette.FAULT_PALETTE
    with pytest.raises(KeyError, match="not a registered fault.*fc-bypass"):
        palette.fault_color("no-such-fault")


def test_a_newly_registered_fault_gets_the_next_colour(monkeypatch):
    """The palette reads the registry when asked, so a fault added to it is coloured by its position."""
    n = len(F.ORDER)
    monkeypatch.setattr(F, "ORDER", {**F.ORDER, "brand-new-fault": n})   # as F.registered() does
    assert palette.fault_color("brand-new-fault") == palette.FAULT_PALETTE[n % len(palette.FAULT_PALETTE)]
    assert palette.color("brand-new-fault, T=1") == palette.fault_color("brand-new-fault")


def test_labels_colour_by_setting():
    """A label's temperature or layer suffix does not change its colour; combinations and custom
    labels get a stable palette colour."""
    assert palette.color("healthy, T=1") == palette.HEALTHY_COLOR
    assert palette.color("fc-bypass, layers [2, 4, 5]") == palette.fault_color("fc-bypass")
    combo = palette.color("fc-bypass + d2t-absolute")
    assert combo in palette.FAULT_PALETTE and combo == palette.color("fc-bypass + d2t-absolute, T=1")


def _sources():
    return {p.name: p.read_text() for p in sorted(VIEWS.glob("*.py"))}


def test_no_pyplot_in_library_code():
    """No module of eagle_nb imports matplotlib.pyplot (global figure state): figures are Figures."""
    bad = []
    for p in sorted((VIEWS.parent).rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom)
                     else [])
            bad += [f"{p.name}:{node.lineno}" for n in names if n.startswith("matplotlib.pyplot")]
    assert not bad


def test_figure_colours_come_from_the_palette():
    """No figure module writes a colour literal of its own (hex codes live in palette.py only)."""
    figures = {"acceptance.py", "traces.py", "model_plots.py", "doctor_plots.py", "engine_figures.py"}
    hits = {name: re.findall(r"[\"']#[0-9a-fA-F]{3,8}[\"']", src) for name, src in _sources().items()
            if name in figures}
    assert {k: v for k, v in hits.items() if v} == {}


# -- doctor and engine figures ---------------------------------------------------------------------
def _diagnosis(cause="fc-bypass"):
    def hyp(fault, tau, per):
        return SimpleNamespace(fault=fault, predicted={"tau": tau, "tau_se": 0.05, "per_position": per})
    hyps = [hyp("healthy", 3.1, [0.8, 0.6, 0.45, 0.3]), hyp("fc-bypass", 1.2, [0.15, 0.03, 0.0, 0.0]),
            hyp("d2t-absolute", 1.0, [0.0, 0.0, 0.0, 0.0]), hyp("layer-ids+1", 2.2, [0.6, 0.3, 0.2, 0.1])]
    return SimpleNamespace(hypotheses=hyps, inputs={"depth": 4},
                           observation={"tau": 1.25, "per_position": [0.17, 0.05, 0.02, 0.01]},
                           verdict=SimpleNamespace(cause=cause, confidence="high", basis="measured"))


def _trained(d, status):
    files = [0.8, 0.6, 0.5] if status == "pass" else [0.2, 0.1, 0.05]
    d.checks = [SimpleNamespace(id="train-accuracy", status=status, data={
        "kind": "acc", "trained": [0.82, 0.63, 0.52], "files": files, "source": "train.log"})]
    return d


def test_training_figure_draws_log_files_and_serving():
    """One panel per diagnosis: the training log, the files' teacher-forced accuracy, the files'
    served acceptance and the engine's per position; a diagnosis without the check is refused."""
    fig = doctor_plots.plot_training({"a": _trained(_diagnosis(), "pass"), "b": _trained(_diagnosis(), "fail")})
    assert len(fig.axes) == 2
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["training log (acc_j)", "the files, teacher-forced (acc_j)",
                      "the files served: acceptance per position", "the engine: acceptance per position"]
    assert list(fig.axes[1].lines[1].get_ydata()) == [0.2, 0.1, 0.05]
    assert "NOT reproduced" in fig.axes[1].get_title() and "engine τ 1.25" in fig.axes[0].get_title()
    with pytest.raises(ValueError, match="no measured train-accuracy check"):
        doctor_plots.plot_training({"a": SimpleNamespace(checks=[], hypotheses=[], observation=None)})


def _comparison(engine=True):
    ref = SimpleNamespace(per_position_acceptance=[0.8, 0.6, 0.4, 0.3], accept_length=3.1)
    eng = SimpleNamespace(per_position_acceptance=[0.2, 0.05, 0.0, 0.0], accept_length=1.25)
    return SimpleNamespace(reference=ref, engine=eng if engine else None, verdict_kind="under-accepts")


def _parsed_log():
    from eagle_nb.engines.logs import parse_log
    lines = [f"INFO 11-30 08:53:{10 * i:02d} [metrics.py:120] SpecDecoding metrics: Mean acceptance "
             f"length: {2.0 + 0.1 * i:.2f}, Accepted throughput: 344.45 tokens/s, Drafted throughput: "
             f"684.90 tokens/s, Accepted: {50 + i} tokens, Drafted: 100 tokens, Per-position acceptance "
             f"rate: 0.600, 0.400, 0.300, 0.200, Avg Draft acceptance rate: 37.5%" for i in range(5)]
    return parse_log("\n".join(lines))


@pytest.fixture
def no_pyplot_figures():
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before


def test_doctor_and_engine_figures_follow_the_convention(no_pyplot_figures):
    """The doctor's and the engines' figures are Figures made without pyplot, legible at the size
    shown (>= 7 pt, inside the figure, nothing printed over anything), and colour healthy and the
    verdict's fault from the palette (the rest neutral); the engine log plot handles an empty log."""
    from matplotlib.colors import to_hex
    figs = {"diagnosis": doctor_plots.plot_diagnosis(_diagnosis()),
            "comparison": engine_figures.plot_comparison(_comparison(), title="shipped pair, k=4"),
            "comparison, no engine counters": engine_figures.plot_comparison(_comparison(False)),
            "engine log": engine_figures.plot_log(_parsed_log()),
            "training": doctor_plots.plot_training({"shipped files": _trained(_diagnosis(), "pass"),
                                                    "export": _trained(_diagnosis(), "fail")}),
            "empty engine log": engine_figures.plot_log(SimpleNamespace(df=_parsed_log().df.iloc[:0]))}
    problems = {name: helpers.legibility_problems(fig) for name, fig in figs.items()}
    assert {n: p for n, p in problems.items() if p} == {}
    bars = {t.get_text(): to_hex(p.get_facecolor()) for t, p in
            zip(figs["diagnosis"].axes[0].get_yticklabels(), figs["diagnosis"].axes[0].patches)}
    assert bars["healthy"] == palette.HEALTHY_COLOR
    assert bars["fc-bypass"] == palette.fault_color("fc-bypass")
    assert bars["d2t-absolute"] == bars["layer-ids+1"] == palette.NEUTRAL_COLOR
    colours = {to_hex(p.get_facecolor()) for p in figs["comparison"].axes[0].patches}
    assert colours == {palette.LOOP_COLOR, palette.ENGINE_COLOR}
