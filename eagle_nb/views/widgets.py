"""ipywidgets panels that re-run the speculation loop under chosen faults, live in a kernel.

`AblationPanel` (notebook 03) and `DepthPanel` (notebook 04) wire controls to a `Setting`, ask
`Pair.run` (cached per setting) for results and hand them to a `plots` function.

What the user sees while it computes: a status line names the setting being computed (and which
setting the figure below shows); text and figure are one HTML value, replaced in one message, so
they never disagree. In a kernel the work runs on one background thread: clicks only record the
latest wanted setting, a setting that became stale is never drawn, and the rest of its work is
skipped (the `Pair.run` in flight finishes and stays cached). `DepthPanel` draws the shown depth
first, then fills in the other depths one by one.

Outside a kernel (tests, scripts) or with `background=False` everything runs synchronously in the
control callback. For headless tests each panel exposes `controls` (name -> widget), `setting()`,
`wait()`, and what it last drew: `last_setting`, `last_result`, `last_figure`, `history`.

A rendered notebook keeps widget state but not the Python callbacks, so a live panel is dead in
HTML; its fallback there points to the precomputed panel (`switcher.py`). Knows nothing about
models beyond `Pair`; no algorithm lives here.
"""
from __future__ import annotations

import html
import threading
import time

from eagle_nb.experiment import faults as F
from eagle_nb.experiment.results import Sweep
from eagle_nb.experiment.setting import Setting
from eagle_nb.model.fault_names import FC_BYPASS
from eagle_nb.views import plots

HEALTHY = F.HEALTHY
WIDE = {"description_width": "initial"}      # descriptions shown whole ("temperature", not "temperat…")


def describe(s: Setting) -> str:
    """A setting in the words the panels use: 'fc-bypass, k=4, T=0'."""
    return f"{s.label}, k={s.depth}, T={s.temperature:g}"


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None


class _Panel:
    """Shared plumbing: status line, one HTML view (text + figure), latest-wins background worker."""

    def _build(self, rows, background: bool | None) -> None:
        import ipywidgets as w
        self.background = _in_kernel() if background is None else bool(background)
        self.status = w.HTML()
        self.view = w.HTML()
        self.last_setting = self.last_result = self.last_figure = self.last_error = None
        self.history: list[Setting] = []
        self._cv = threading.Condition()
        self._wanted: Setting | None = None
        self._busy: Setting | None = None
        self._thread: threading.Thread | None = None
        for c in self.controls.values():
            c.observe(self._on_change, names="value")
        self.widget = w.VBox([*rows, self.status, self.view])
        self.redraw()

    # -- requests: latest wins -----------------------------------------------------------------------
    def _on_change(self, change) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Ask for the controls' current setting; in the background, any older request is dropped."""
        s = self.setting()
        if not self.background:
            self._busy = s
            self._show_status()
            self._compute(s)
            self._busy = None
            self._show_status()
            return
        with self._cv:
            self._wanted = s
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True, name="eagle-nb-panel")
                self._thread.start()
            self._cv.notify_all()
        self._show_status()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while self._wanted is None:
                    self._cv.notify_all()           # wake wait()ers: idle
                    self._cv.wait()
                s, self._wanted, self._busy = self._wanted, None, self._wanted
            self._show_status()
            self._compute(s)
            with self._cv:
                self._busy = None
            self._show_status()

    def stale(self) -> bool:
        """A newer setting was asked for while this one computes."""
        return self._wanted is not None

    @property
    def busy(self) -> Setting | None:
        """The setting being computed now, if any."""
        return self._busy

    def wait(self, timeout: float = 600.0) -> bool:
        """Block until the panel is idle (nothing computing, nothing queued). True if idle."""
        end = time.monotonic() + timeout
        with self._cv:
            while self._busy is not None or self._wanted is not None:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.2))
        return True

    # -- drawing ---------------------------------------------------------------------------------------
    def _compute(self, s: Setting) -> None:
        try:
            for result, fig, text in self._steps(s):
                if self.stale():
                    return                         # never draw a setting that is no longer wanted
                self._draw(s, result, fig, text)
        except Exception as e:  # noqa: BLE001 - shown in the panel; the controls stay usable
            self.last_error = e
            self.view.value = (f"<b style='color:#c62828'>{html.escape(describe(s))}: "
                               f"{html.escape(type(e).__name__)}: {html.escape(str(e))}</b>")

    def _draw(self, s, result, fig, text) -> None:
        self._png = plots.figure_to_png(fig)
        self.last_setting, self.last_result, self.last_figure, self.last_error = s, result, fig, None
        self.history.append(s)
        # text and image in one value: the front end replaces both at once
        self.view.value = (f"<div class='enb-text'>{text}</div><img alt='{html.escape(describe(s))}' "
                           f"title='{html.escape(describe(s))}' style='max-width:100%' "
                           f"src='{plots.png_data_uri(self._png)}'/>")

    def _show_status(self) -> None:
        busy, wanted, shown = self._busy, self._wanted, self.last_setting
        if busy is None:                      # the worker is about to take it
            busy, wanted = wanted, None
        parts = []
        if busy is not None:
            parts.append(f"⏳ computing <b>{html.escape(describe(busy))}</b> "
                         f"({len(self.prompts)} prompts × {busy.max_new_tokens} tokens)")
        if wanted is not None and wanted != busy:
            parts.append(f"next: <b>{html.escape(describe(wanted))}</b>")
        if shown is not None:
            parts.append(f"figure shows <b>{html.escape(describe(shown))}</b>")
        idle = busy is None and wanted is None
        color = "#2e7d32" if idle else "#e65100"
        self.status.value = (f"<span class='enb-status' data-busy='{0 if idle else 1}' "
                             f"style='color:{color}'>{' · '.join(parts) or 'idle'}</span>")

    def _repr_mimebundle_(self, **kwargs):
        """The live widget, plus an HTML fallback for renderers without a kernel (reports): a
        pointer to the precomputed panel, not a stale snapshot."""
        bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = (
            "<div class='enb-live-fallback'><p><i>Live panel: its controls need a running Python "
            "kernel (open this notebook in JupyterLab, e.g. <code>make lab</code>). In this report, "
            "the <a href='#precomputed-panel'>precomputed panel</a> switches between the same "
            "settings without a kernel.</i></p></div>")
        return bundle


class AblationPanel(_Panel):
    """Notebook 03: toggle faults, shift the captured layer ids, change depth and temperature;
    redraws acceptance of the chosen setting beside the healthy pipeline at the same depth."""

    def __init__(self, pair, prompts, *, depth: int = 4, max_new_tokens: int = 32,
                 temperature: float = 0.0, seed: int = 0, faults=None, max_depth: int = 8,
                 background: bool | None = None):
        import ipywidgets as w
        faults = F.TOGGLES if faults is None else tuple(faults)      # the registry's `toggle`s
        self.pair, self.prompts = pair, list(prompts)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.controls = {f: w.Checkbox(value=False, description=f, indent=False,
                                       tooltip=F.STORIES[f]) for f in faults}
        self.controls["layer_shift"] = w.Dropdown(
            options=[("-1: HF ids read as output-of-layer ids", -1), ("0: as configured", 0),
                     ("+1: output-of-layer ids read as HF ids", 1)],
            value=0, description="layer ids", style=WIDE)
        self.controls["depth"] = w.IntSlider(value=depth, min=1, max=max_depth, description="depth k",
                                             continuous_update=False, style=WIDE)
        self.controls["temperature"] = w.Dropdown(options=list(pair.temperatures), value=float(temperature),
                                                  description="temperature", style=WIDE)
        self.fault_names = list(faults)
        boxes = w.HBox([self.controls[f] for f in faults])
        knobs = w.HBox([self.controls[k] for k in ("layer_shift", "depth", "temperature")])
        self._build([boxes, knobs], background)

    def setting(self) -> Setting:
        return Setting.of([f for f in self.fault_names if self.controls[f].value],
                          self.controls["layer_shift"].value, depth=self.controls["depth"].value,
                          temperature=self.controls["temperature"].value,
                          max_new_tokens=self.max_new_tokens, seed=self.seed)

    def _steps(self, s: Setting):
        result = self.pair.run(self.prompts, s, progress=False)
        if self.stale():
            return
        base = result if not s.faults and s.layer_ids is None else \
            self.pair.run(self.prompts, s.but(faults=(), layer_ids=None), progress=False)
        name = s.label
        shown = {HEALTHY: base} if base is result else {HEALTHY: base, name: result}
        fig = plots.plot_acceptance(shown, title=f"{describe(s)} ({len(self.prompts)} prompts × "
                                                 f"{s.max_new_tokens} tokens)")
        ids = [int(i) for i in result.wiring.get("layer_ids_hf", [])]
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
        vs = "" if base is result else f" vs healthy τ {base.metrics.accept_length:.2f}"
        text = (f"<b>{html.escape(name)}</b>: τ {result.metrics.accept_length:.2f}{vs} "
                f"(k={s.depth}, T={s.temperature:g}); captured HF layer ids {ids} "
                f"(feature mode {html.escape(str(result.wiring.get('feature_mode')))})<br>"
                f"<code style='white-space:pre'>"
                f"{html.escape(plots.log_lines({name: result}).iloc[0, 0])}</code>"
                f"<ul>{notes}</ul>")
        yield result, fig, text


class DepthPanel(_Panel):
    """Notebook 04: tau vs depth for healthy and a chosen fault at a chosen temperature, and the
    per-position acceptance at a chosen depth. The chosen depth is computed first, then the others,
    redrawing as each depth lands."""

    def __init__(self, pair, prompts, *, depths=range(1, 9), max_new_tokens: int = 32, seed: int = 0,
                 faults=None, temperature: float = 0.0, depth: int = 4, background: bool | None = None):
        import ipywidgets as w
        if faults is None:      # the registry's `toggle`s, fc-bypass first
            faults = (FC_BYPASS,) + tuple(f for f in F.TOGGLES if f != FC_BYPASS)
        self.pair, self.prompts, self.depths = pair, list(prompts), list(depths)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.controls = {
            "fault": w.Dropdown(options=list(faults), value=faults[0], description="fault", style=WIDE),
            "temperature": w.Dropdown(options=list(pair.temperatures), value=float(temperature),
                                      description="temperature", style=WIDE),
            "depth": w.IntSlider(value=depth, min=min(self.depths), max=max(self.depths),
                                 description="show k", continuous_update=False, style=WIDE),
        }
        self._build([w.HBox(list(self.controls.values()))], background)

    def setting(self) -> Setting:
        return Setting(faults=(self.controls["fault"].value,), depth=self.controls["depth"].value,
                       temperature=self.controls["temperature"].value,
                       max_new_tokens=self.max_new_tokens, seed=self.seed)

    def _steps(self, s: Setting):
        order = [s.depth] + [k for k in self.depths if k != s.depth]
        runs = []
        for n, k in enumerate(order, 1):
            t0 = time.perf_counter()
            for f in ((), s.faults):
                runs.append(self.pair.run(self.prompts, s.but(faults=f, depth=k), progress=False))
                if self.stale():
                    return
            # redraw when a depth had to be computed (cached ones are instant), and at the end
            if n == 1 or n == len(order) or time.perf_counter() - t0 > 0.05:
                yield self._frame(s, Sweep(runs), n, len(order))

    def _frame(self, s: Setting, sw: Sweep, done: int, total: int):
        at_k = sw.by_label(s.depth, s.temperature)
        fig = plots.plot_depth_overview(sw.curves(), at_k, s.depth)
        text = ", ".join(f"{html.escape(n)}: τ {r.metrics.accept_length:.2f}" for n, r in at_k.items())
        more = "" if done == total else f" — depths {done}/{total} computed, more coming"
        return sw[s], fig, (f"k={s.depth}, T={s.temperature:g} ({len(self.prompts)} prompts × "
                            f"{s.max_new_tokens} tokens): {text}{more}")
