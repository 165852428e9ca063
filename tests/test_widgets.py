"""Tests for eagle_nb.widgets: panels are driven headless by setting control values, and each redraw
must use the new setting; the static switcher holds every precomputed state, loads nothing from the
network, and switches states in a real browser.

A fake pair stands in for `Pair` (STYLE rule 12): its `run` records every call and returns exact
metrics that depend on the setting, so the tests pin which setting a redraw used.
"""
from __future__ import annotations

import re

import pytest

from eagle_nb import report, widgets
from eagle_nb.metrics import from_stats
from eagle_nb.session import RunResult
from eagle_nb.speculate import SpecStats, VerifyStep

PROMPTS = ["a", "b"]


class FakePair:
    """`run` returns a RunResult whose accepted counts encode the setting: healthy accepts every
    draft, any fault accepts none; `fail` names ablations that raise."""

    def __init__(self, fail=()):
        self.calls: list[dict] = []
        self.layer_ids = [2, 4, 5]
        self.fail = set(fail)

    def run(self, prompts, depth=4, max_new_tokens=32, temperature=0.0, seed=0, ablations=(),
            check_reference=False, progress=True):
        self.calls.append(dict(prompts=tuple(prompts), depth=depth, max_new_tokens=max_new_tokens,
                               temperature=temperature, seed=seed, ablations=tuple(ablations)))
        if self.fail & set(ablations):
            raise ValueError(f"cannot apply {sorted(self.fail & set(ablations))}")
        a = 0 if ablations else depth
        steps = [VerifyStep(a, list(range(depth)), list(range(depth + 1))) for _ in range(3)]
        st = SpecStats(depth, temperature, 3, tokens=[1] * (3 * (a + 1)), steps=steps, total_s=1.0)
        shift = 1 if "layer-ids+1" in ablations else -1 if "layer-ids-1" in ablations else 0
        setting = {"depth": depth, "temperature": temperature, "ablations": list(ablations),
                   "layer_ids_hf": [i + shift for i in self.layer_ids], "feature_mode": "aux"}
        return RunResult(setting, list(prompts), ["x"] * len(prompts), [st], from_stats([st]),
                         notes=[f"{n}: note" for n in ablations])


# -- pure helpers ----------------------------------------------------------------------------------
def test_ablations_for_orders_loader_faults_first_and_maps_shift():
    """Loader faults apply before capture faults; the layer shift becomes layer-ids±1; unknown
    faults and shifts are refused."""
    assert widgets.ablations_for(["fc-bypass", "layers0-keys-dropped"], 1) == \
        ("layers0-keys-dropped", "fc-bypass", "layer-ids+1")
    assert widgets.ablations_for([], -1) == ("layer-ids-1",)
    assert widgets.ablations_for() == ()
    with pytest.raises(ValueError, match="unknown faults"):
        widgets.ablations_for(["nope"])
    with pytest.raises(ValueError, match="layer_shift"):
        widgets.ablations_for([], 2)


def test_sweep_runs_every_combination_once():
    """sweep calls run once per (setting, T, k) and tau_curves / at_depth regroup the results."""
    pair = FakePair()
    res = widgets.sweep(pair, PROMPTS, settings={"healthy": (), "fc-bypass": ("fc-bypass",)},
                        depths=[1, 2, 3], temperatures=[0.0, 1.0], max_new_tokens=8, progress=False)
    assert len(res) == len(pair.calls) == 12
    curves = widgets.tau_curves(res)
    assert sorted(curves) == ["fc-bypass, T=0", "fc-bypass, T=1", "healthy, T=0", "healthy, T=1"]
    assert curves["healthy, T=0"][3].metrics.accept_length == 4.0
    assert set(widgets.at_depth(res, 2)) == set(curves)


# -- live panels -----------------------------------------------------------------------------------
def test_ablation_panel_controls_do_not_update_continuously():
    """Sliders fire only on release (continuous_update=False)."""
    panel = widgets.AblationPanel(FakePair(), PROMPTS)
    assert panel.controls["depth"].continuous_update is False
    assert set(panel.controls) == {*widgets.FAULTS, "layer_shift", "depth", "temperature"}


def test_ablation_panel_redraw_uses_new_setting():
    """Each control change redraws once with the new setting: the last run call, last_setting,
    last_result and the figure title all carry it."""
    pair = FakePair()
    panel = widgets.AblationPanel(pair, PROMPTS, depth=4, max_new_tokens=8)
    assert panel.last_setting["ablations"] == () and panel.last_result.metrics.accept_length == 5.0

    panel.controls["fc-bypass"].value = True
    assert pair.calls[-1]["ablations"] == ("fc-bypass",)
    assert panel.last_setting["ablations"] == ("fc-bypass",)
    assert panel.last_result.metrics.accept_length == 1.0

    panel.controls["depth"].value = 6
    assert pair.calls[-1]["depth"] == 6 and panel.last_result.metrics.depth == 6
    assert "k=6" in panel.last_figure._suptitle.get_text()

    panel.controls["layer_shift"].value = 1
    assert pair.calls[-1]["ablations"] == ("fc-bypass", "layer-ids+1")
    assert panel.last_result.setting["layer_ids_hf"] == [3, 5, 6]
    assert "[3, 5, 6]" in panel.info.value

    panel.controls["temperature"].value = 1.0
    assert pair.calls[-1]["temperature"] == 1.0
    assert [h["depth"] for h in panel.history] == [4, 4, 6, 6, 6]


def test_ablation_panel_compares_against_healthy_at_same_depth():
    """Every redraw also runs the healthy pipeline with the same depth/temperature (cached in Pair)."""
    pair = FakePair()
    panel = widgets.AblationPanel(pair, PROMPTS)
    panel.controls["d2t-absolute"].value = True
    base, fault = pair.calls[-2:]
    assert base["ablations"] == () and fault["ablations"] == ("d2t-absolute",)
    assert base["depth"] == fault["depth"]
    legend = [t.get_text() for t in panel.last_figure.axes[0].get_legend().get_texts()]
    assert legend == ["healthy (τ=5.00)", "d2t-absolute (τ=1.00)"]


def test_ablation_panel_shows_errors_and_stays_usable():
    """A setting that raises is shown in the panel (not raised); the next setting draws again."""
    panel = widgets.AblationPanel(FakePair(fail={"wrapper-capture"}), PROMPTS)
    panel.controls["wrapper-capture"].value = True
    assert isinstance(panel.last_error, ValueError)
    assert "cannot apply" in panel.info.value
    panel.controls["wrapper-capture"].value = False
    assert panel.last_error is None and panel.last_setting["ablations"] == ()


def test_panel_output_and_html_fallback_hold_the_figure():
    """The Output area holds the PNG of the last redraw, and the display bundle carries a static
    HTML fallback (for reports) next to the live widget view."""
    panel = widgets.AblationPanel(FakePair(), PROMPTS)
    out = panel.output.outputs[-1]
    assert out["data"]["image/png"]
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "data:image/png;base64," in bundle["text/html"] and "running Python kernel" in bundle["text/html"]


def test_depth_panel_redraw_uses_new_setting():
    """Changing temperature reruns the depth sweep at that temperature; changing the shown depth
    changes last_result's depth; the fault dropdown selects the compared ablation."""
    pair = FakePair()
    panel = widgets.DepthPanel(pair, PROMPTS, depths=[1, 2, 3], depth=2)
    assert panel.controls["depth"].continuous_update is False
    panel.controls["temperature"].value = 1.0
    assert {c["temperature"] for c in pair.calls[-6:]} == {1.0}
    assert panel.last_setting["temperature"] == 1.0
    panel.controls["depth"].value = 3
    assert panel.last_result.metrics.depth == 3
    panel.controls["fault"].value = "d2t-absolute"
    assert pair.calls[-1]["ablations"] == ("d2t-absolute",)
    assert panel.last_result.setting["ablations"] == ["d2t-absolute"]


# -- static switcher -------------------------------------------------------------------------------
def _switcher():
    states = {(f, k): f"<p class='payload'>{f} at {k}</p>" for f in ("healthy", "layer-ids+1") for k in (2, 4)}
    return widgets.StaticSwitcher("t", {"fault": ["healthy", "layer-ids+1"], "depth": [2, 4]}, states,
                                  default=("layer-ids+1", 4))


def test_static_switcher_html_holds_every_state():
    """Every state is in the page with its key; only the default is visible without JavaScript;
    '+' is encoded as encodeURIComponent would; nothing is loaded from the network."""
    html = _switcher().html()
    keys = re.findall(r'class="enb-state" data-state="([^"]+)"( hidden)?', html)
    assert [k for k, _ in keys] == ["fault=healthy&amp;depth=2", "fault=healthy&amp;depth=4",
                                    "fault=layer-ids%2B1&amp;depth=2", "fault=layer-ids%2B1&amp;depth=4"]
    assert [h for _, h in keys] == [" hidden", " hidden", " hidden", ""]
    assert "<script>" in html and report.external_urls(html) == []
    assert '<option value="layer-ids+1" selected>' in html


def test_static_switcher_rejects_bad_states():
    """Keys must have one value per control, and the default must be precomputed."""
    with pytest.raises(ValueError, match="one value per control"):
        widgets.StaticSwitcher("t", {"a": [1]}, {(1, 2): ""})
    with pytest.raises(ValueError, match="not precomputed"):
        widgets.StaticSwitcher("t", {"a": [1, 2]}, {(1,): ""}, default=(2,))


def test_ablation_switcher_precomputes_every_fault_and_depth():
    """fault x depth states, each with an embedded PNG and the SGLang log line, each compared with
    healthy at the same depth; the summary holds tau per state."""
    pair = FakePair()
    sw = widgets.ablation_switcher(pair, PROMPTS, depths=(2, 3), progress=False)
    faults = ("healthy",) + widgets.FAULTS + ("layer-ids+1", "layer-ids-1")
    assert set(sw.states) == {(f, str(k)) for f in faults for k in (2, 3)}
    assert all(frag.count("<img") == 1 and "accept len:" in frag for frag in sw.states.values())
    assert sw.summary["healthy, k=3"] == 4.0 and sw.summary["fc-bypass, k=2"] == 1.0
    assert sw.default == ("fc-bypass", "3")
    assert len(pair.calls) == len(faults) * 2


def test_depth_switcher_states_per_temperature_and_depth():
    """One state per (temperature, depth) of a sweep."""
    res = widgets.sweep(FakePair(), PROMPTS, settings={"healthy": (), "fc-bypass": ("fc-bypass",)},
                        depths=[1, 2], temperatures=[0.0, 1.0], progress=False)
    sw = widgets.depth_switcher(res)
    assert set(sw.states) == {(t, str(k)) for t in ("0", "1") for k in (1, 2)}
    assert sw.summary["fc-bypass, T=1, k=2"] == 1.0


# -- in a real browser -----------------------------------------------------------------------------
from helpers import needs_chromium, shown_states  # noqa: E402


@needs_chromium
def test_switcher_fragment_selects_state_in_chromium(tmp_path):
    """Opened with `#fault=layer-ids+1&depth=2`, the page shows exactly that state (the inline script
    ran and read the fragment); without a fragment it shows the default."""
    page = tmp_path / "s.html"
    page.write_text(_switcher().page())
    dom = report.browser_dom(page.as_uri() + "#fault=layer-ids+1&depth=2")
    assert shown_states(dom) == ["fault=layer-ids%2B1&depth=2"]
    assert "showing fault=layer-ids+1, depth=2" in dom
    assert shown_states(report.browser_dom(page.as_uri())) == ["fault=layer-ids%2B1&depth=4"]


@needs_chromium
def test_switcher_select_change_switches_state_in_chromium(tmp_path):
    """Changing a <select> (a change event, as a user's click fires) shows the matching state, and
    the 'next' button steps to the following state."""
    html = _switcher().page().replace("</body>", """<script>
      var s=document.querySelector('select[data-control="fault"]'); s.value="healthy";
      s.dispatchEvent(new Event("change"));
      document.body.setAttribute("data-after-change", document.querySelector(".enb-switcher").getAttribute("data-shown"));
      document.querySelector('button[data-step="1"]').click();
    </script></body>""")
    page = tmp_path / "s.html"
    page.write_text(html)
    dom = report.browser_dom(page.as_uri())
    assert 'data-after-change="fault=healthy&amp;depth=4"' in dom
    assert shown_states(dom) == ["fault=layer-ids%2B1&depth=2"]
