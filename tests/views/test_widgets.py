"""Tests for eagle_nb.views.widgets: live panels are driven headless by setting control values, and each
redraw must use the new setting; in the background mode (a kernel) only the latest setting is
computed and drawn, and the status line names what is being computed.

`helpers.FakePair` stands in for `Pair` (STYLE rule 12): its `run` records every call and returns
exact metrics that depend on the setting, so the tests pin which setting a redraw used.
"""
from __future__ import annotations

import re
import threading
import time

from eagle_nb.experiment import faults
from eagle_nb.views import widgets
from eagle_nb.experiment.setting import Setting
from helpers import FakePair

PROMPTS = ["a", "b"]


def shown(panel) -> str:
    """The setting named by the image of the panel's view (its alt text)."""
    return re.search(r"<img alt='([^']*)'", panel.view.value).group(1)


def test_ablation_panel_controls_do_not_update_continuously():
    """Sliders fire only on release (continuous_update=False); descriptions are shown whole."""
    panel = widgets.AblationPanel(FakePair(), PROMPTS)
    assert panel.controls["depth"].continuous_update is False
    assert set(panel.controls) == {*faults.TOGGLES, "layer_shift", "depth", "temperature"}
    assert panel.controls["temperature"].style.description_width == "initial"
    assert panel.background is False            # no kernel here: synchronous


def test_panels_offer_only_the_temperatures_the_pair_computes():
    """A recorded pair answers T = 0 only: both panels offer that alone; a loaded pair offers 0 and 1."""
    recorded = FakePair()
    recorded.temperatures = (0.0,)
    for panel in (widgets.AblationPanel(recorded, PROMPTS), widgets.DepthPanel(recorded, PROMPTS)):
        assert list(panel.controls["temperature"].options) == [0.0]
    assert list(widgets.DepthPanel(FakePair(), PROMPTS).controls["temperature"].options) == [0.0, 1.0]


def test_ablation_panel_redraw_uses_new_setting():
    """Each control change redraws once with the new setting: the last run call, last_setting,
    last_result, the figure title, and the view's text and image all carry it."""
    pair = FakePair()
    panel = widgets.AblationPanel(pair, PROMPTS, depth=4, max_new_tokens=8)
    assert panel.last_setting == Setting(depth=4, max_new_tokens=8)
    assert panel.last_result.metrics.accept_length == 5.0
    assert pair.calls == [Setting(depth=4, max_new_tokens=8)]     # healthy is its own baseline

    panel.controls["fc-bypass"].value = True
    assert pair.calls[-2].faults == ("fc-bypass",) and pair.calls[-1].faults == ()
    assert panel.last_setting.faults == ("fc-bypass",)
    assert panel.last_result.metrics.accept_length == 1.0
    assert shown(panel) == "fc-bypass, k=4, T=0" and "<b>fc-bypass</b>: τ 1.00 vs healthy τ 5.00" in panel.view.value

    panel.controls["depth"].value = 6
    assert pair.calls[-1].depth == 6 and panel.last_result.metrics.depth == 6
    assert "k=6" in panel.last_figure._suptitle.get_text() and shown(panel) == "fc-bypass, k=6, T=0"

    panel.controls["layer_shift"].value = 1
    assert pair.calls[-2].faults == ("fc-bypass", "layer-ids+1")
    assert panel.last_result.wiring["layer_ids_hf"] == [3, 5, 6]
    assert "[3, 5, 6]" in panel.view.value

    panel.controls["temperature"].value = 1.0
    assert pair.calls[-1].temperature == 1.0
    assert [h.depth for h in panel.history] == [4, 4, 6, 6, 6]
    assert "figure shows <b>fc-bypass + layer-ids+1, k=6, T=1</b>" in panel.status.value
    assert "data-busy='0'" in panel.status.value


def test_ablation_panel_compares_against_healthy_at_same_depth():
    """A faulted setting is drawn beside the healthy pipeline with the same depth/temperature."""
    pair = FakePair()
    panel = widgets.AblationPanel(pair, PROMPTS)
    panel.controls["d2t-absolute"].value = True
    fault, base = pair.calls[-2:]
    assert base.faults == () and fault.faults == ("d2t-absolute",)
    assert base == fault.but(faults=())
    legend = [t.get_text() for t in panel.last_figure.legends[0].get_texts()]
    assert legend == ["healthy (τ=5.00)", "d2t-absolute (τ=1.00)"]


def test_ablation_panel_shows_errors_and_stays_usable():
    """A setting that raises is shown in the panel (not raised); the next setting draws again."""
    panel = widgets.AblationPanel(FakePair(fail={"wrapper-capture"}), PROMPTS)
    panel.controls["wrapper-capture"].value = True
    assert isinstance(panel.last_error, ValueError)
    assert "cannot apply" in panel.view.value and "wrapper-capture, k=4" in panel.view.value
    panel.controls["wrapper-capture"].value = False
    assert panel.last_error is None and panel.last_setting.faults == ()


def test_panel_view_holds_text_and_figure_together_and_report_fallback_points_on():
    """Text and PNG are one HTML value (replaced together); the display bundle's static HTML
    fallback (for reports) points to the precomputed panel instead of a stale snapshot."""
    panel = widgets.AblationPanel(FakePair(), PROMPTS)
    assert "<b>healthy</b>: τ 5.00" in panel.view.value and "src='data:image/png;base64," in panel.view.value
    bundle = panel._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "running Python kernel" in bundle["text/html"] and "#precomputed-panel" in bundle["text/html"]
    assert "<img" not in bundle["text/html"]


class SlowPair(FakePair):
    """A FakePair whose runs take `delay` seconds and can be held until released."""

    def __init__(self, delay=0.05):
        super().__init__()
        self.delay = delay
        self.gate = threading.Event()
        self.gate.set()

    def run(self, prompts, setting=None, **kw):
        self.gate.wait(10)
        time.sleep(self.delay)
        return super().run(prompts, setting, **kw)


def test_background_panel_computes_only_the_latest_setting_and_says_so():
    """In background mode, clicks while a setting computes only replace what comes next: the status
    names the setting being computed and the next one, settings clicked past are never run or
    drawn, and the panel ends showing (text and image) the last setting chosen."""
    pair = SlowPair()
    panel = widgets.AblationPanel(pair, PROMPTS, background=True)
    assert panel.wait(10) and shown(panel) == "healthy, k=4, T=0"
    pair.gate.clear()                                   # hold the next run in flight
    panel.controls["depth"].value = 2
    time.sleep(0.2)
    assert panel.busy == Setting(depth=2, max_new_tokens=32)
    assert "computing <b>healthy, k=2, T=0</b>" in panel.status.value
    assert "data-busy='1'" in panel.status.value
    for k in (3, 5, 6, 7):                              # quick clicks while k=2 computes
        panel.controls["depth"].value = k
    assert "next: <b>healthy, k=7, T=0</b>" in panel.status.value
    pair.gate.set()
    assert panel.wait(10)
    assert {s.depth for s in pair.calls} == {4, 2, 7}   # 3, 5 and 6 were skipped
    assert [s.depth for s in panel.history] == [4, 7]   # k=2 went stale before it was drawn
    assert shown(panel) == "healthy, k=7, T=0" and "k=7" in panel.view.value.split("<img")[0]
    assert "data-busy='0'" in panel.status.value


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
    assert {c.faults for c in pair.calls[-6:]} == {(), ("d2t-absolute",)}
    assert panel.last_result.setting.faults == ("d2t-absolute",)


def test_depth_panel_draws_the_shown_depth_first_then_the_others():
    """On a new fault the shown depth is computed first and drawn at once; later depths follow,
    each redraw holding more of the curve, the last one all of it."""
    pair = SlowPair(delay=0.0)
    panel = widgets.DepthPanel(pair, PROMPTS, depths=[1, 2, 3, 4], depth=3)
    n0 = len(pair.calls)
    drawn = []
    orig = panel._draw
    panel._draw = lambda s, r, fig, text: (drawn.append(text), orig(s, r, fig, text))
    pair.delay = 0.06                                   # every run now counts as computed
    panel.controls["fault"].value = "d2t-absolute"
    new = pair.calls[n0:]
    assert [c.depth for c in new if c.faults] == [3, 1, 2, 4]
    assert len(drawn) == 4 and "depths 1/4 computed" in drawn[0] and "computed" not in drawn[-1]
    assert panel.last_figure is not None and panel.last_setting.depth == 3
