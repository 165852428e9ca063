"""ipywidgets panels that re-run the speculation loop under chosen faults, and a static switcher
that keeps those ablations explorable in a rendered HTML report.

Live panels (`AblationPanel` for notebook 03, `DepthPanel` for notebook 04) only wire controls to
`Pair.run` (cached per setting) and to a `plots` function. Every control has
`continuous_update=False` where it has the option. For headless tests each panel exposes
`controls` (name -> widget), `setting()`, and what it last drew: `last_setting`, `last_result`,
`last_figure`, and `history`.

A rendered notebook keeps widget *state* but not the Python callbacks, so a live panel is dead in
HTML. `StaticSwitcher` is the report-side answer: every setting of the report's controls is
precomputed (`sweep`), rendered to an embedded PNG and table, and a small inline script shows the
chosen one. It loads nothing from the network. A URL fragment such as `#fault=fc-bypass&depth=4`
preselects a state, so a link can point a colleague at one setting.

Knows nothing about models beyond `Pair.run`; no algorithm lives here.
"""
from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
from urllib.parse import quote

from . import plots
from .ablations import ABLATIONS

# Faults a panel can toggle, in the order they are applied: the loader faults replace the drafter
# first, then the capture faults choose what the target hands over.
FAULTS = ("layers0-keys-dropped", "d2t-absolute", "wrapper-capture", "fc-bypass")
SHIFTS = {-1: "layer-ids-1", 0: None, 1: "layer-ids+1"}
HEALTHY = "healthy"


def ablations_for(faults=(), layer_shift: int = 0) -> tuple[str, ...]:
    """The ablation names for a set of toggled faults and a captured-layer-id shift, in order."""
    unknown = [f for f in faults if f not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {sorted(ABLATIONS)}")
    if layer_shift not in SHIFTS:
        raise ValueError(f"layer_shift must be one of {sorted(SHIFTS)}, got {layer_shift}")
    names = [f for f in FAULTS if f in faults] + [f for f in faults if f not in FAULTS]
    return tuple(names + ([SHIFTS[layer_shift]] if SHIFTS[layer_shift] else []))


def setting_label(ablations) -> str:
    return " + ".join(ablations) if ablations else HEALTHY


def sweep(pair, prompts, *, settings=None, depths=(4,), temperatures=(0.0,),
          max_new_tokens: int = 32, seed: int = 0, progress: bool = True) -> dict:
    """Run every (setting, temperature, depth) combination once (Pair.run caches them).
    `settings`: {name: ablation names}, default healthy only. Returns {(name, T, k): RunResult}."""
    from tqdm.auto import tqdm
    settings = settings or {HEALTHY: ()}
    grid = list(itertools.product(settings.items(), temperatures, depths))
    out = {}
    for (name, abl), T, k in tqdm(grid, desc="settings", disable=not progress):
        out[(name, T, k)] = pair.run(prompts, depth=k, max_new_tokens=max_new_tokens,
                                     temperature=T, seed=seed, ablations=tuple(abl), progress=False)
    return out


def tau_curves(results: dict) -> dict:
    """{(name, T, k): RunResult} from `sweep` -> {"name, T=t": {k: RunResult}} for plot_tau_vs_depth."""
    curves: dict = {}
    for (name, T, k), r in results.items():
        curves.setdefault(f"{name}, T={T:g}", {})[k] = r
    return curves


def at_depth(results: dict, k: int) -> dict:
    """{(name, T, k): RunResult} from `sweep` -> {"name, T=t": RunResult} at one depth."""
    return {f"{name}, T={T:g}": r for (name, T, kk), r in results.items() if kk == k}


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
                 temperature: float = 0.0, seed: int = 0, faults=FAULTS, max_depth: int = 8):
        import ipywidgets as w
        self.pair, self.prompts = pair, list(prompts)
        self.max_new_tokens, self.seed = max_new_tokens, seed
        self.controls = {f: w.Checkbox(value=False, description=f, indent=False,
                                       tooltip=ABLATIONS[f]) for f in faults}
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

    def setting(self) -> dict:
        faults = [f for f in self.fault_names if self.controls[f].value]
        shift = self.controls["layer_shift"].value
        return {"faults": faults, "layer_shift": shift, "ablations": ablations_for(faults, shift),
                "depth": self.controls["depth"].value,
                "temperature": self.controls["temperature"].value}

    def _render(self, s: dict):
        kw = dict(depth=s["depth"], max_new_tokens=self.max_new_tokens, temperature=s["temperature"],
                  seed=self.seed, progress=False)
        base = self.pair.run(self.prompts, ablations=(), **kw)
        result = self.pair.run(self.prompts, ablations=s["ablations"], **kw)
        name = setting_label(s["ablations"])
        fig = plots.plot_acceptance({HEALTHY: base, name: result},
                                    title=f"k={s['depth']}, T={s['temperature']:g}")
        ids = result.setting.get("layer_ids_hf")
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
        text = (f"<b>{html.escape(name)}</b>: tau {result.metrics.accept_length:.2f} vs healthy "
                f"{base.metrics.accept_length:.2f}; captured HF layer ids {ids} "
                f"(feature mode {html.escape(str(result.setting.get('feature_mode')))})<br>"
                f"<code>{html.escape(plots.log_lines({name: result}).iloc[0, 0])}</code>"
                f"<ul>{notes}</ul>")
        return result, fig, text


class DepthPanel(_Panel):
    """Notebook 04: tau vs depth for healthy and a chosen fault at a chosen temperature, and the
    per-position acceptance at a chosen depth."""

    def __init__(self, pair, prompts, *, depths=range(1, 9), max_new_tokens: int = 32, seed: int = 0,
                 faults=("fc-bypass",) + tuple(f for f in FAULTS if f != "fc-bypass"),
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

    def setting(self) -> dict:
        return {k: c.value for k, c in self.controls.items()}

    def _render(self, s: dict):
        settings = {HEALTHY: (), s["fault"]: (s["fault"],)}
        res = sweep(self.pair, self.prompts, settings=settings, depths=self.depths,
                    temperatures=(s["temperature"],), max_new_tokens=self.max_new_tokens,
                    seed=self.seed, progress=False)
        at_k = {name: res[(name, s["temperature"], s["depth"])] for name in settings}
        fig = plots.plot_depth_overview(tau_curves(res), at_k, s["depth"])
        text = ", ".join(f"{n}: tau {r.metrics.accept_length:.2f}" for n, r in at_k.items())
        return at_k[s["fault"]], fig, f"k={s['depth']}, T={s['temperature']:g}: {html.escape(text)}"


# -- static precomputed switcher (reports) ---------------------------------------------------------
def state_key(values: dict) -> str:
    """The fragment-style key of one state, e.g. `fault=fc-bypass&depth=4`. Values are encoded as
    JavaScript's encodeURIComponent encodes them, so the inline script builds the same string."""
    return "&".join(f"{quote(str(k), safe=SAFE)}={quote(str(v), safe=SAFE)}" for k, v in values.items())


SAFE = "!*'()"   # characters encodeURIComponent leaves alone beyond what quote() keeps

_CSS = """
.enb-switcher{border:1px solid #cfd8dc;border-radius:6px;padding:8px 12px;margin:8px 0;font-family:sans-serif}
.enb-switcher .enb-title{font-weight:bold;margin-bottom:6px}
.enb-switcher .enb-controls{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin-bottom:8px}
.enb-switcher .enb-current{color:#455a64;font-size:90%}
.enb-switcher .enb-state[hidden]{display:none !important}
.enb-switcher img{max-width:100%}
.enb-switcher table{border-collapse:collapse;font-size:85%}
.enb-switcher td,.enb-switcher th{border:1px solid #eceff1;padding:2px 6px}
"""

_JS = """
(function(){
  var root=document.getElementById(%(id)s); if(!root) return;
  var sels=root.querySelectorAll("select[data-control]"), states=root.querySelectorAll(".enb-state");
  var cur=root.querySelector(".enb-current");
  function enc(s){return encodeURIComponent(s);}
  function key(){var p=[];for(var i=0;i<sels.length;i++){p.push(enc(sels[i].getAttribute("data-control"))+"="+enc(sels[i].value));}return p.join("&");}
  function show(){var k=key(),found=false;
    for(var i=0;i<states.length;i++){var on=states[i].getAttribute("data-state")===k;states[i].hidden=!on;if(on){found=true;}}
    root.setAttribute("data-shown",found?k:"");
    cur.textContent=(found?"showing ":"not precomputed: ")+decodeURIComponent(k).split("&").join(", ");}
  function select(k){var parts=k.split("&");
    for(var n=0;n<parts.length;n++){var kv=parts[n].split("=");if(kv.length!==2){continue;}
      var name=decodeURIComponent(kv[0]),val=decodeURIComponent(kv[1]);
      for(var i=0;i<sels.length;i++){if(sels[i].getAttribute("data-control")!==name){continue;}
        for(var j=0;j<sels[i].options.length;j++){if(sels[i].options[j].value===val){sels[i].value=val;}}}}}
  function fromUrl(){var h=(window.location.hash||"").replace(/^#/,"");var q=(window.location.search||"").replace(/^\\?/,"");
    if(q){select(q);} if(h){select(h);}}
  function step(d){var k=key(),i0=-1;for(var i=0;i<states.length;i++){if(states[i].getAttribute("data-state")===k){i0=i;}}
    var nx=states[(i0+d+states.length)%%states.length];select(nx.getAttribute("data-state"));show();}
  for(var i=0;i<sels.length;i++){sels[i].addEventListener("change",show);}
  var btns=root.querySelectorAll("button[data-step]");
  for(var b=0;b<btns.length;b++){btns[b].addEventListener("click",function(){step(parseInt(this.getAttribute("data-step"),10));});}
  window.addEventListener("hashchange",function(){fromUrl();show();});
  fromUrl();show();
})();
"""


class StaticSwitcher:
    """Precomputed states of a panel, switched in the page by <select>s and a small inline script.

    `controls`: {name: [values]} (their product is the grid); `states`: {tuple of values: HTML
    fragment}. Missing combinations say "not precomputed". Without JavaScript the default state
    stays visible. Displays itself as HTML in a notebook (`_repr_html_`)."""

    def __init__(self, title: str, controls: dict, states: dict, default: tuple | None = None,
                 note: str = ""):
        self.title, self.note = title, note
        self.controls = {k: [str(v) for v in vs] for k, vs in controls.items()}
        self.states = {tuple(str(v) for v in key): frag for key, frag in states.items()}
        bad = [k for k in self.states if len(k) != len(self.controls)]
        if bad:
            raise ValueError(f"state keys {bad[:3]} do not have one value per control {list(self.controls)}")
        self.default = tuple(str(v) for v in default) if default else next(iter(self.states))
        if self.default not in self.states:
            raise ValueError(f"default state {self.default} was not precomputed")
        digest = hashlib.sha1(json.dumps([title, sorted(self.states)]).encode()).hexdigest()[:10]
        self.id = f"enb-sw-{digest}"
        self.summary: dict = {}   # what the precomputing function wants recorded (e.g. tau per state)

    def key(self, values: tuple) -> str:
        return state_key(dict(zip(self.controls, values)))

    def html(self) -> str:
        sel = []
        for i, (name, values) in enumerate(self.controls.items()):
            opts = "".join(f'<option value="{html.escape(v)}"'
                           f'{" selected" if v == self.default[i] else ""}>{html.escape(v)}</option>'
                           for v in values)
            sel.append(f'<label>{html.escape(name)} <select data-control="{html.escape(name)}">'
                       f'{opts}</select></label>')
        divs = "".join(
            f'<div class="enb-state" data-state="{html.escape(self.key(k))}"'
            f'{"" if k == self.default else " hidden"}>{frag}</div>' for k, frag in self.states.items())
        note = f'<div class="enb-note">{self.note}</div>' if self.note else ""
        current = ", ".join(f"{n}={v}" for n, v in zip(self.controls, self.default))
        return (f'<div class="enb-switcher" id="{self.id}" data-shown="{html.escape(self.key(self.default))}">'
                f"<style>{_CSS}</style><div class='enb-title'>{html.escape(self.title)}</div>{note}"
                f"<div class='enb-controls'>{''.join(sel)}"
                '<span><button type="button" data-step="-1">&#9664; prev</button> '
                '<button type="button" data-step="1">next &#9654;</button></span>'
                f'<span class="enb-current">showing {html.escape(current)}</span></div>'
                f"{divs}<script>{_JS % {'id': json.dumps(self.id)}}</script></div>")

    def _repr_html_(self) -> str:
        return self.html()

    def page(self) -> str:
        """A standalone HTML document holding only this switcher."""
        return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(self.title)}"
                f"</title></head><body>{self.html()}</body></html>")


def _state_html(fig, table, lines, notes=()) -> str:
    img = f'<img alt="acceptance plot" src="{plots.figure_to_data_uri(fig)}"/>'
    note = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    pre = html.escape("\n".join(lines))
    return f"{img}{table.to_html(border=0)}<pre>{pre}</pre>" + (f"<ul>{note}</ul>" if note else "")


def ablation_switcher(pair, prompts, *, faults=(HEALTHY,) + FAULTS + ("layer-ids+1", "layer-ids-1"),
                      depths=(2, 4, 6), temperature: float = 0.0, max_new_tokens: int = 32,
                      seed: int = 0, default=None, progress: bool = True) -> StaticSwitcher:
    """Notebook 03's report panel: every fault x depth precomputed, each beside healthy."""
    settings = {HEALTHY: (), **{f: (f,) for f in faults if f != HEALTHY}}
    res = sweep(pair, prompts, settings=settings, depths=depths, temperatures=(temperature,),
                max_new_tokens=max_new_tokens, seed=seed, progress=progress)
    states, summary = {}, {}
    for f, k in itertools.product(faults, depths):
        base, r = res[(HEALTHY, temperature, k)], res[(f, temperature, k)]
        summary[f"{f}, k={k}"] = r.metrics.accept_length
        shown = {HEALTHY: base} if f == HEALTHY else {HEALTHY: base, f: r}
        fig = plots.plot_acceptance(shown, title=f"{f}, k={k}, T={temperature:g}")
        lines = [f"{n}: {line}" for n, line in plots.log_lines(shown)["SGLang (len/(k+1))"].items()]
        states[(f, k)] = _state_html(fig, plots.metrics_table(shown).iloc[:10], lines, r.notes)
    sw = StaticSwitcher("Precomputed ablations (switch in the page; no kernel needed)",
                        {"fault": list(faults), "depth": list(depths)}, states,
                        default=default or ("fc-bypass" if "fc-bypass" in faults else faults[0],
                                            depths[len(depths) // 2]),
                        note=f"{len(prompts)} prompts, {max_new_tokens} new tokens each, "
                             f"temperature {temperature:g}, seed {seed}.")
    sw.summary = summary
    return sw


def depth_switcher(results: dict, default=None) -> StaticSwitcher:
    """Notebook 04's report panel from a `sweep` result: per-position acceptance of every setting
    at each (temperature, depth)."""
    names = list(dict.fromkeys(n for n, _, _ in results))
    temps = sorted({T for _, T, _ in results})
    depths = sorted({k for _, _, k in results})
    states, summary = {}, {}
    for T, k in itertools.product(temps, depths):
        shown = {n: results[(n, T, k)] for n in names if (n, T, k) in results}
        summary.update({f"{n}, T={T:g}, k={k}": r.metrics.accept_length for n, r in shown.items()})
        fig = plots.plot_acceptance(shown, title=f"k={k}, T={T:g}")
        lines = [f"{n}: {line}" for n, line in plots.log_lines(shown)["vLLM"].items()]
        states[(f"{T:g}", k)] = _state_html(fig, plots.metrics_table(shown).iloc[:10], lines)
    sw = StaticSwitcher("Per-position acceptance by temperature and depth (precomputed)",
                        {"temperature": [f"{T:g}" for T in temps], "depth": depths}, states,
                        default=default or (f"{temps[0]:g}", depths[min(3, len(depths) - 1)]))
    sw.summary = summary
    return sw
