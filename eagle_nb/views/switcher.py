"""The report-side panel: `StaticSwitcher`, every state of a panel precomputed and switched in the
page by <select>s and a small inline script (the `_JS` constant below; nothing is loaded from the
network), and the two switchers the reports use, built from a `Sweep`.

A rendered notebook keeps widget state but not the Python callbacks, so a live panel is dead in
HTML. Here each state is rendered to an embedded PNG and a table; a URL fragment such as
`#fault=fc-bypass&depth=4` preselects a state, so a link can point a colleague at one setting.

Switchers do not compute: they take a `Sweep` that `Pair.sweep` already ran. Knows nothing about
models.
"""
from __future__ import annotations

import hashlib
import html
import itertools
import json
from urllib.parse import quote

from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.experiment.setting import CHAIN
from eagle_nb.model.fault_names import FC_BYPASS
from eagle_nb.views import plots


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
.enb-switcher pre{white-space:pre;overflow-x:auto;word-break:normal;overflow-wrap:normal}
.enb-switcher table{border-collapse:collapse;font-size:85%}
.enb-switcher td,.enb-switcher th{border:1px solid #eceff1;padding:2px 6px}
"""

_JS = """
(function(){
  var root=document.getElementById(%(id)s); if(!root) return;
  var sels=root.querySelectorAll("select[data-control]"), states=root.querySelectorAll(".enb-state");
  var cur=root.querySelector(".enb-current");
  function enc(s){return encodeURIComponent(s);}
  function values(k){var p=k.split("&"),v=[];for(var i=0;i<p.length;i++){v.push(decodeURIComponent(p[i].split("=")[1]));}return v;}
  var grid=[];for(var s=0;s<states.length;s++){grid.push(values(states[s].getAttribute("data-state")));}
  function key(){var p=[];for(var i=0;i<sels.length;i++){p.push(enc(sels[i].getAttribute("data-control"))+"="+enc(sels[i].value));}return p.join("&");}
  // Control i offers the values some precomputed state has with controls 0..i-1 as chosen; a value
  // no longer offered moves to the nearest offered one. So every choice shows a precomputed state.
  function offer(){for(var i=0;i<sels.length;i++){var ok={},opts=sels[i].options,at=sels[i].selectedIndex,pick=-1;
      for(var s=0;s<grid.length;s++){var m=true;for(var j=0;j<i;j++){if(grid[s][j]!==sels[j].value){m=false;break;}}if(m){ok[grid[s][i]]=1;}}
      for(var o=0;o<opts.length;o++){var on=ok.hasOwnProperty(opts[o].value);opts[o].disabled=!on;opts[o].hidden=!on;
        if(on&&(pick<0||Math.abs(o-at)<Math.abs(pick-at))){pick=o;}}
      if(!ok.hasOwnProperty(sels[i].value)&&pick>=0){sels[i].selectedIndex=pick;}}}
  function show(){offer();var k=key(),found=false;
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

    `controls`: {name: [values]}, in order; `states`: {tuple of values: HTML fragment}; the states
    need not fill the product of the controls. In the page the controls cascade, so none offers a
    combination that was not precomputed: each offers the values some state has with the controls
    before it as chosen (the others are hidden), and a change moves a later control whose value is
    no longer offered to the nearest one that is. A control value no state has is refused here.
    Without JavaScript the default state stays visible. Displays itself as HTML in a notebook
    (`_repr_html_`)."""

    def __init__(self, title: str, controls: dict, states: dict, default: tuple | None = None,
                 note: str = ""):
        self.title, self.note = title, note
        self.controls = {k: [str(v) for v in vs] for k, vs in controls.items()}
        self.states = {tuple(str(v) for v in key): frag for key, frag in states.items()}
        bad = [k for k in self.states if len(k) != len(self.controls)]
        if bad:
            raise ValueError(f"state keys {bad[:3]} do not have one value per control {list(self.controls)}")
        unused = [f"{name}={v}" for i, (name, vs) in enumerate(self.controls.items()) for v in vs
                  if not any(k[i] == v for k in self.states)]
        if unused:
            raise ValueError(f"controls offer values no state was precomputed for: {unused[:5]}")
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
        return (f'<a id="precomputed-panel"></a>'
                f'<div class="enb-switcher" id="{self.id}" data-shown="{html.escape(self.key(self.default))}">'
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


class not_precomputed:
    """What a notebook shows instead of a precomputed panel when it runs with a live kernel (the
    panel is built only for the HTML report, `precompute_report=True`)."""

    def __init__(self, instead: str = "the live panel above"):
        self.text = (f"Precomputed panel not built here (it is for the HTML report: `eagle-nb report` "
                     f"sets precompute_report=True); use {instead}.")

    def _repr_html_(self) -> str:
        return f"<p><i>{html.escape(self.text)}</i></p>"

    def __repr__(self) -> str:
        return self.text


def _state_html(fig, table, lines, notes=(), alt: str = "acceptance plot") -> str:
    img = f'<img alt="{html.escape(alt)}" src="{plots.figure_to_data_uri(fig)}"/>'
    note = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
    pre = html.escape("\n".join(lines))
    return f"{img}{table.to_html(border=0)}<pre>{pre}</pre>" + (f"<ul>{note}</ul>" if note else "")


def ablation_switcher(sweep, temperature: float | None = None, default=None, axis: str = "fault",
                      title: str = "Precomputed ablations") -> StaticSwitcher:
    """Notebook 03's report panel: every setting x depth of the sweep (at one temperature), each
    beside healthy at the same depth. The sweep must hold the healthy setting at every depth.
    Notebook 07 switches serving conditions with it (`axis="condition"`)."""
    T = sweep.temperatures[0] if temperature is None else float(temperature)
    runs = [r for r in sweep if r.setting.temperature == T]
    labels = list(dict.fromkeys([HEALTHY] + [r.label for r in runs]))
    depths = sorted({r.setting.depth for r in runs})
    states, summary = {}, {}
    for f, k in itertools.product(labels, depths):
        at = sweep.by_label(k, T)
        if HEALTHY not in at or f not in at:
            raise ValueError(f"the sweep has no {HEALTHY if HEALTHY not in at else f} run at "
                             f"depth {k}, temperature {T:g}")
        base, r = at[HEALTHY], at[f]
        summary[f"{f}, k={k}"] = r.metrics.accept_length
        shown = {HEALTHY: base} if f == HEALTHY else {HEALTHY: base, f: r}
        fig = plots.plot_acceptance(shown, title=f"{f}, k={k}, T={T:g}")
        lines = [f"{n}: {line}" for n, line in plots.log_lines(shown)["SGLang (len/(k+1))"].items()]
        states[(f, k)] = _state_html(fig, plots.metrics_table(shown).iloc[:10], lines, r.notes,
                                     alt=f"{f}, k={k}, T={T:g}")
    s0 = runs[0].setting
    first = FC_BYPASS if FC_BYPASS in labels else labels[min(1, len(labels) - 1)]
    sw = StaticSwitcher(f"{title} (switch in the page; no kernel needed)",
                        {axis: labels, "depth": depths}, states,
                        default=default or (first,
                                            depths[len(depths) // 2]),
                        note=f"{len(runs[0].prompts)} prompts, {s0.max_new_tokens} new tokens each, "
                             f"temperature {T:g}, seed {s0.seed}.")
    sw.summary = summary
    return sw


def depth_switcher(sweep, default=None, trees=None) -> StaticSwitcher:
    """Notebook 04's report panel: per-position acceptance of every setting of the sweep at each
    (temperature, depth), and with `trees` (a sweep of tree settings, e.g. notebook 04's width
    axis) a `shape` axis (`Setting.shape`) first: each tree shape where it was computed, beside
    the chain of the same setting; the temperature and depth controls then offer only where it
    was (`StaticSwitcher`). Chain settings in `trees` are ignored (the sweep holds them)."""
    temps, depths = sweep.temperatures, sweep.depths
    tree_runs = [r for r in (trees or []) if r.setting.is_tree]
    shapes = list(dict.fromkeys([CHAIN] + [r.setting.shape for r in tree_runs]))
    states, summary = {}, {}

    def add(shape, T, k, shown, title):
        fig = plots.plot_acceptance(shown, title=title)
        lines = [f"{n}: {line}" for n, line in plots.log_lines(shown)["vLLM"].items()]
        states[(shape, f"{T:g}", k)] = _state_html(fig, plots.metrics_table(shown).iloc[:10], lines,
                                                   alt=title)
        summary.update({f"{n}, T={T:g}, k={k}": r.metrics.accept_length for n, r in shown.items()})

    for T, k in itertools.product(temps, depths):
        add(CHAIN, T, k, sweep.by_label(k, T), f"k={k}, T={T:g}")
    for shape in shapes[1:]:
        for r in tree_runs:
            s = r.setting
            if s.shape != shape:
                continue
            cs = s.but(topk=1, num_draft_tokens=None)        # the chain of the same setting
            chain = sweep[cs] if cs in sweep else None
            shown = {r.label: r, **({f"{cs.label}, {cs.shape}": chain} if chain else {})}
            add(shape, s.temperature, s.depth, shown, f"{shape}, k={s.depth}, T={s.temperature:g}")
    r0 = next(iter(sweep))
    controls = {"temperature": [f"{T:g}" for T in temps], "depth": depths}
    if len(shapes) > 1:
        controls = {"shape": shapes, **controls}
    else:
        states = {key[1:]: frag for key, frag in states.items()}
    first = (f"{temps[0]:g}", min(depths, key=lambda k: (abs(k - 4), k)))   # the depth nearest 4
    sw = StaticSwitcher("Per-position acceptance by temperature and depth (precomputed)"
                        + (" and shape (chain or tree)" if len(shapes) > 1 else ""),
                        controls, states,
                        default=default or ((CHAIN, *first) if len(shapes) > 1 else first),
                        note=f"{len(r0.prompts)} prompts, {r0.setting.max_new_tokens} new tokens each, "
                             f"seed {r0.setting.seed}."
                             + (" A tree shape offers the temperatures and depths it was "
                                "computed at." if len(shapes) > 1 else ""))
    sw.summary = summary
    return sw
