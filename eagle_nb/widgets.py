"""ipywidgets panels that re-run the speculation loop under chosen faults, live in a kernel.

`AblationPanel` (notebook 03) and `DepthPanel` (notebook 04) only wire controls to a `Setting`,
ask `Pair.run` / `Pair.sweep` (cached per setting) for results and hand them to a `plots`
function. Every control has `continuous_update=False` where it has the option. For headless tests
each panel exposes `controls` (name -> widget), `setting()`, and what it last drew:
`last_setting`, `last_result`, `last_figure`, and `history`.

A rendered notebook keeps widget state but not the Python callbacks, so a live panel is dead in
HTML; the report-side answer is `switcher.py`. Knows nothing about models beyond `Pair`; no
algorithm lives here.
"""
from __future__ import annotations

import base64
import html

from . import faults as F
from . import plots
from .setting import Setting, grid

HEALTHY = F.HEALTHY


# -- live panels -------------------------------------------------------------------------------------
class _Panel:
    """Shared plumbing: an Output area, redraw on any control change, a record of what was drawn."""

    def _build(self, rows) -> None:
        import ipywidgets as w
        self.output = w.Output()
        self.info = w.HTML()
        self.last_setting = self.last_result = self.last_figure = self.last_error = None
        self.history: list[dict] = []
        for c in self.controls.values():
            c.observe(self._on_change, names="value")
        self.widget = w.VBox([*rows, self.info, self.output])
        self.redraw()

    def _on_change(self, change) -> None:
        self.redraw()

    def redraw(self) -> None:
        setting = self.setting()
        self.info.value = f"<i>running {html.escape(str(setting))} …</i>"
        try:
            result, fig, text = self._render(setting)
        except Exception as e:  # noqa: BLE001 - shown in the panel; the control stays usable
            self.last_error = e
            self.info.value = f"<b style='color:#c62828'>{html.escape(type(e).__name__)}: " \
                              f"{html.escape(str(e))}</b>"
            return
        self.last_setting, self.last_result, self.last_figure, self.last_error = setting, result, fig, None
        self.history.append(setting)
        self.info.value = text
        self._png = plots.figure_to_png(fig)
        # Setting the Output's `outputs` directly (as Output.append_display_data does) works the
        # same live and headless, with no print to stdout outside a kernel.
        self.output.outputs = ({"output_type": "display_data", "metadata": {},
                                "data": {"image/png": base64.b64encode(self._png).decode("ascii"),
                                         "text/plain": f"<figure: {setting}>"}},)

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus an HTML fallback for renderers without a kernel (reports)."""
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        img = base64.b64encode(getattr(self, "_png", b"")).decode("ascii")
        bundle["text/html"] = (
            "<div class='enb-live-fallback'><p><i>Live panel: its controls need a running Python "
            "kernel. Snapshot of its last setting below; switch settings in the precomputed panel "
            f"of this report.</i></p>{self.info.value}"
            f"<img alt='live panel snapshot' src='data:image/png;base64,{img}'/></div>")
        return bundle


class AblationPanel(_Panel):
    """Notebook 03: toggle faults, shift the captured layer ids, change depth and temperature;
    redraws acceptance of the chosen setting beside the healthy pipeline at the same depth."""

    def __init__(self, pair, prompts, *, depth: int = 4, max_new_tokens: int = 32,
                 temperature: float = 0.0, seed: int = 0, faults=F.TOGGLES, max_depth: int = 8):
        import ipywidgets as w
        self.pair, self.prompts = pair, list(prompts)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.controls = {f: w.Checkbox(value=False, description=f, indent=False,
                                       tooltip=F.STORIES[f]) for f in faults}
        self.controls["layer_shift"] = w.Dropdown(
            options=[("-1: HF ids read as output-of-layer ids", -1), ("0: as configured", 0),
                     ("+1: output-of-layer ids read as HF ids", 1)],
            value=0, description="layer ids")
        self.controls["depth"] = w.IntSlider(value=depth, min=1, max=max_depth, description="depth k",
                                             continuous_update=False)
        self.controls["temperature"] = w.Dropdown(options=[0.0, 1.0], value=float(temperature),
                                                  description="temperature")
        self.fault_names = list(faults)
        boxes = w.HBox([self.controls[f] for f in faults])
        knobs = w.HBox([self.controls[k] for k in ("layer_shift", "depth", "temperature")])
        self._build([boxes, knobs])

    def setting(self) -> Setting:
        return Setting.of([f for f in self.fault_names if self.controls[f].value],
                          self.controls["layer_shift"].value, depth=self.controls["depth"].value,
                          temperature=self.controls["temperature"].value,
                          max_new_tokens=self.max_new_tokens, seed=self.seed)

    def _render(self, s: Setting):
        base = self.pair.run(self.prompts, s.but(faults=()), progress=False)
        result = self.pair.run(self.prompts, s, progress=False)
        name = s.label
        fig = plots.plot_acceptance({HEALTHY: base, name: result},
                                    title=f"k={s.depth}, T={s.temperature:g}")
        ids = result.wiring.get("layer_ids_hf")
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
        text = (f"<b>{html.escape(name)}</b>: tau {result.metrics.accept_length:.2f} vs healthy "
                f"{base.metrics.accept_length:.2f}; captured HF layer ids {ids} "
                f"(feature mode {html.escape(str(result.wiring.get('feature_mode')))})<br>"
                f"<code>{html.escape(plots.log_lines({name: result}).iloc[0, 0])}</code>"
                f"<ul>{notes}</ul>")
        return result, fig, text


class DepthPanel(_Panel):
    """Notebook 04: tau vs depth for healthy and a chosen fault at a chosen temperature, and the
    per-position acceptance at a chosen depth."""

    def __init__(self, pair, prompts, *, depths=range(1, 9), max_new_tokens: int = 32, seed: int = 0,
                 faults=("fc-bypass",) + tuple(f for f in F.TOGGLES if f != "fc-bypass"),
                 temperature: float = 0.0, depth: int = 4):
        import ipywidgets as w
        self.pair, self.prompts, self.depths = pair, list(prompts), list(depths)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.controls = {
            "fault": w.Dropdown(options=list(faults), value=faults[0], description="fault"),
            "temperature": w.Dropdown(options=[0.0, 1.0], value=float(temperature),
                                      description="temperature"),
            "depth": w.IntSlider(value=depth, min=min(self.depths), max=max(self.depths),
                                 description="show k", continuous_update=False),
        }
        self._build([w.HBox(list(self.controls.values()))])

    def setting(self) -> Setting:
        return Setting(faults=(self.controls["fault"].value,), depth=self.controls["depth"].value,
                       temperature=self.controls["temperature"].value,
                       max_new_tokens=self.max_new_tokens, seed=self.seed)

    def _render(self, s: Setting):
        sw = self.pair.sweep(self.prompts, grid([(), s.faults], self.depths, [s.temperature],
                                                max_new_tokens=self.max_new_tokens, seed=self.seed),
                             progress=False)
        at_k = sw.by_label(s.depth, s.temperature)
        fig = plots.plot_depth_overview(sw.curves(), at_k, s.depth)
        text = ", ".join(f"{n}: tau {r.metrics.accept_length:.2f}" for n, r in at_k.items())
        return sw[s], fig, f"k={s.depth}, T={s.temperature:g}: {html.escape(text)}"
