"""Tests for eagle_nb.widgets: live panels are driven headless by setting control values, and each
redraw must use the new setting.

`helpers.FakePair` stands in for `Pair` (STYLE rule 12): its `run` records every call and returns
exact metrics that depend on the setting, so the tests pin which setting a redraw used.
"""
from __future__ import annotations

from eagle_nb import faults, widgets
from eagle_nb.setting import Setting
from helpers import FakePair

PROMPTS = ["a", "b"]


def test_ablation_panel_controls_do_not_update_continuously():
    """Sliders fire only on release (continuous_update=False)."""
    panel = widgets.AblationPanel(FakePair(), PROMPTS)
    assert panel.controls["depth"].continuous_update is False
    assert set(panel.controls) == {*faults.TOGGLES, "layer_shift", "depth", "temperature"}


def test_ablation_panel_redraw_uses_new_setting():
    """Each control change redraws once with the new setting: the last run call, last_setting,
    last_result and the figure title all carry it."""
    pair = FakePair()
    panel = widgets.AblationPanel(pair, PROMPTS, depth=4, max_new_tokens=8)
    assert panel.last_setting == Setting(depth=4, max_new_tokens=8)
    assert panel.last_result.metrics.accept_length == 5.0

    panel.controls["fc-bypass"].value = True
    assert pair.calls[-1].faults == ("fc-bypass",)
    assert panel.last_setting.faults == ("fc-bypass",)
    assert panel.last_result.metrics.accept_length == 1.0

    panel.controls["depth"].value = 6
    assert pair.calls[-1].depth == 6 and panel.last_result.metrics.depth == 6
    assert "k=6" in panel.last_figure._suptitle.get_text()

    panel.controls["layer_shift"].value = 1
    assert pair.calls[-1].faults == ("fc-bypass", "layer-ids+1")
    assert panel.last_result.wiring["layer_ids_hf"] == [3, 5, 6]
    assert "[3, 5, 6]" in panel.info.value

    panel.controls["temperature"].value = 1.0
    assert pair.calls[-1].temperature == 1.0
    assert [h.depth for h in panel.history] == [4, 4, 6, 6, 6]


def test_ablation_panel_compares_against_healthy_at_same_depth():
    """Every redraw also runs the healthy pipeline with the same depth/temperature (cached in Pair)."""
    pair = FakePair()
    panel = widgets.AblationPanel(pair, PROMPTS)
    panel.controls["d2t-absolute"].value = True
    base, fault = pair.calls[-2:]
    assert base.faults == () and fault.faults == ("d2t-absolute",)
    assert base == fault.but(faults=())
    legend = [t.get_text() for t in panel.last_figure.axes[0].get_legend().get_texts()]
    assert legend == ["healthy (τ=5.00)", "d2t-absolute (τ=1.00)"]


def test_ablation_panel_shows_errors_and_stays_usable():
    """A setting that raises is shown in the panel (not raised); the next setting draws again."""
    panel = widgets.AblationPanel(FakePair(fail={"wrapper-capture"}), PROMPTS)
    panel.controls["wrapper-capture"].value = True
    assert isinstance(panel.last_error, ValueError)
    assert "cannot apply" in panel.info.value
    panel.controls["wrapper-capture"].value = False
    assert panel.last_error is None and panel.last_setting.faults == ()


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
    changes last_result's depth; the fault dropdown selects the compared fault."""
    pair = FakePair()
    panel = widgets.DepthPanel(pair, PROMPTS, depths=[1, 2, 3], depth=2)
    assert panel.controls["depth"].continuous_update is False
    panel.controls["temperature"].value = 1.0
    assert {c.temperature for c in pair.calls[-6:]} == {1.0}
    assert panel.last_setting.temperature == 1.0
    panel.controls["depth"].value = 3
    assert panel.last_result.metrics.depth == 3
    panel.controls["fault"].value = "d2t-absolute"
    assert pair.calls[-1].faults == ("d2t-absolute",)
    assert panel.last_result.setting.faults == ("d2t-absolute",)
