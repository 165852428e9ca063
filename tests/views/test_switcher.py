"""Tests for eagle_nb.views.switcher: the static switcher holds every precomputed state, loads nothing
from the network, and switches states in a real browser; the report switchers render a Sweep
without computing anything.
"""
from __future__ import annotations

import re

import pytest

from eagle_nb.experiment import faults
from eagle_nb.report import html as report_html
from eagle_nb.views import switcher
from eagle_nb.experiment.setting import grid
from helpers import FakePair

PROMPTS = ["a", "b"]


def _switcher():
    states = {(f, k): f"<p class='payload'>{f} at {k}</p>" for f in ("healthy", "layer-ids+1") for k in (2, 4)}
    return switcher.StaticSwitcher("t", {"fault": ["healthy", "layer-ids+1"], "depth": [2, 4]}, states,
                                   default=("layer-ids+1", 4))


def test_static_switcher_html_holds_every_state():
    """Every state is in the page with its key; only the default is visible without JavaScript;
    '+' is encoded as encodeURIComponent would; nothing is loaded from the network."""
    html = _switcher().html()
    keys = re.findall(r'class="enb-state" data-state="([^"]+)"( hidden)?', html)
    assert [k for k, _ in keys] == ["fault=healthy&amp;depth=2", "fault=healthy&amp;depth=4",
                                    "fault=layer-ids%2B1&amp;depth=2", "fault=layer-ids%2B1&amp;depth=4"]
    assert [h for _, h in keys] == [" hidden", " hidden", " hidden", ""]
    assert "<script>" in html and report_html.external_urls(html) == []
    assert '<option value="layer-ids+1" selected>' in html


def test_static_switcher_rejects_bad_states():
    """Keys must have one value per control, the default must be precomputed, and every value a
    control offers must have a state."""
    with pytest.raises(ValueError, match="one value per control"):
        switcher.StaticSwitcher("t", {"a": [1]}, {(1, 2): ""})
    with pytest.raises(ValueError, match="not precomputed"):
        switcher.StaticSwitcher("t", {"a": [1, 2], "b": [1, 2]}, {(1, 1): "", (2, 2): ""}, default=(1, 2))
    with pytest.raises(ValueError, match=r"no state was precomputed for: \['a=2'\]"):
        switcher.StaticSwitcher("t", {"a": [1, 2]}, {(1,): ""})


def test_ablation_switcher_renders_every_fault_and_depth_of_a_sweep():
    """fault x depth states, each with an embedded PNG and the SGLang log line, each compared with
    healthy at the same depth; the summary holds tau per state; rendering runs nothing."""
    pair = FakePair()
    names = [()] + [(f.name,) for f in faults.FAULTS]
    sw_in = pair.sweep(PROMPTS, grid(names, depths=(2, 3)))
    n_calls = len(pair.calls)
    sw = switcher.ablation_switcher(sw_in)
    labels = ("healthy",) + tuple(f.name for f in faults.FAULTS)
    assert set(sw.states) == {(f, str(k)) for f in labels for k in (2, 3)}
    assert all(frag.count("<img") == 1 and "accept len:" in frag for frag in sw.states.values())
    assert sw.summary["healthy, k=3"] == 4.0 and sw.summary["fc-bypass, k=2"] == 1.0
    assert sw.default == ("fc-bypass", "3")
    assert len(pair.calls) == n_calls == len(labels) * 2


def test_ablation_switcher_needs_healthy_at_every_depth():
    pair = FakePair()
    with pytest.raises(ValueError, match="no healthy run at depth 2"):
        switcher.ablation_switcher(pair.sweep(PROMPTS, grid([("fc-bypass",)], depths=(2,))))


def test_depth_switcher_states_per_temperature_and_depth():
    """One state per (temperature, depth) of a sweep."""
    res = FakePair().sweep(PROMPTS, grid([(), ("fc-bypass",)], depths=[1, 2], temperatures=[0.0, 1.0]))
    sw = switcher.depth_switcher(res)
    assert set(sw.states) == {(t, str(k)) for t in ("0", "1") for k in (1, 2)}
    assert sw.summary["fc-bypass, T=1, k=2"] == 1.0


def test_depth_switcher_tree_axis():
    """With tree runs, a `shape` axis: chain at every (temperature, depth), each tree shape where it
    was computed, shown beside the chain of the same setting; without trees the axis is absent."""
    from eagle_nb.experiment.setting import Setting
    pair = FakePair()
    res = pair.sweep(PROMPTS, grid([(), ("fc-bypass",)], depths=[2, 4], temperatures=[0.0]))
    trees = pair.sweep(PROMPTS, [Setting(depth=4, topk=t, num_draft_tokens=n) for t, n in
                                 ((1, None), (2, 6), (4, 16))])
    sw = switcher.depth_switcher(res, trees=trees)
    assert list(sw.controls) == ["shape", "temperature", "depth"]
    assert sw.controls["shape"] == ["chain", "tree topk 2, 6 nodes", "tree topk 4, 16 nodes"]
    assert set(sw.states) == {("chain", "0", str(k)) for k in (2, 4)} | {
        ("tree topk 2, 6 nodes", "0", "4"), ("tree topk 4, 16 nodes", "0", "4")}
    tree_state = sw.states[("tree topk 4, 16 nodes", "0", "4")]
    assert tree_state.count("<img") == 1 and "healthy, chain: " in tree_state
    assert sw.default == ("chain", "0", "4")
    assert "shape=tree%20topk%202%2C%206%20nodes&amp;temperature=0&amp;depth=4" in sw.html()
    assert list(switcher.depth_switcher(res).controls) == ["temperature", "depth"]


def test_a_tree_has_one_name():
    """`Setting.shape` is the one name of a draft shape: the shape control's values, the tree's
    label in every table and legend, and the chain's name beside it, all use it."""
    from eagle_nb.experiment.setting import Setting
    tree = Setting(depth=4, topk=2, num_draft_tokens=6)
    assert tree.shape == "tree topk 2, 6 nodes" and tree.label == "healthy, tree topk 2, 6 nodes"
    assert Setting(depth=4).shape == "chain" and Setting(depth=4).label == "healthy"
    pair = FakePair()
    res = pair.sweep(PROMPTS, grid([()], depths=[4]))
    sw = switcher.depth_switcher(res, trees=pair.sweep(PROMPTS, [tree]))
    assert sw.controls["shape"] == ["chain", tree.shape]
    assert set(sw.summary) == {"healthy, T=0, k=4", f"{tree.label}, T=0, k=4", "healthy, chain, T=0, k=4"}
    assert "/" not in "".join(sw.summary)


def test_switcher_colours_follow_the_faults(monkeypatch):
    """Every series of every precomputed state is drawn in the colour of its run's faults (the
    healthy chain beside a tree is healthy's colour, not a colour picked from its name)."""
    from eagle_nb.experiment.setting import Setting
    from eagle_nb.views import palette
    seen = []
    monkeypatch.setattr(switcher.plots, "plot_acceptance",     # what is drawn, not how (fast)
                        lambda shown, **kw: seen.extend(shown.items()) or palette.new_figure((1, 1)))
    pair = FakePair()
    res = pair.sweep(PROMPTS, grid([(), ("fc-bypass",)], depths=[2, 4], temperatures=[0.0, 1.0]))
    trees = pair.sweep(PROMPTS, [Setting(depth=4, topk=t, num_draft_tokens=n) for t, n in ((2, 6), (4, 16))])
    switcher.depth_switcher(res, trees=trees)
    switcher.ablation_switcher(res)
    assert len(seen) == 4 * 2 + 2 * 2 + 6     # chain states, tree states, ablations
    for name, r in seen:
        assert palette.color(name) == palette.fault_color(faults.label(r.setting.faults)), name


# -- in a real browser -----------------------------------------------------------------------------
import helpers  # noqa: E402
from helpers import needs_chromium, shown_states  # noqa: E402


@needs_chromium
def test_switcher_fragment_selects_state_in_chromium(tmp_path):
    """Opened with `#fault=layer-ids+1&depth=2`, the page shows exactly that state (the inline script
    ran and read the fragment); without a fragment it shows the default."""
    page = tmp_path / "s.html"
    page.write_text(_switcher().page())
    dom = helpers.browser_dom(page.as_uri() + "#fault=layer-ids+1&depth=2")
    assert shown_states(dom) == ["fault=layer-ids%2B1&depth=2"]
    assert "showing fault=layer-ids+1, depth=2" in dom
    assert shown_states(helpers.browser_dom(page.as_uri())) == ["fault=layer-ids%2B1&depth=4"]


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
    dom = helpers.browser_dom(page.as_uri())
    assert 'data-after-change="fault=healthy&amp;depth=4"' in dom
    assert shown_states(dom) == ["fault=layer-ids%2B1&depth=2"]


@needs_chromium
def test_switcher_offers_only_precomputed_combinations_in_chromium(tmp_path):
    """Notebook 04's panel with a tree axis (chains at 2 temperatures x 3 depths, two trees at
    k = 4, T = 0): from every state, every option a control offers leads to a precomputed state
    (none says "not precomputed"), the controls offer exactly the precomputed combinations, and
    choosing a tree moves depth and temperature to where it was computed."""
    from eagle_nb.experiment.setting import Setting
    pair = FakePair()
    res = pair.sweep(PROMPTS, grid([(), ("fc-bypass",)], depths=[2, 3, 4], temperatures=[0.0, 1.0]))
    trees = pair.sweep(PROMPTS, [Setting(depth=4, topk=t, num_draft_tokens=n) for t, n in ((2, 6), (4, 16))])
    sw = switcher.depth_switcher(res, trees=trees, default=("chain", "1", "2"))
    html = sw.page().replace("</body>", """<script>
      var root=document.querySelector(".enb-switcher"), sels=root.querySelectorAll("select");
      var states=root.querySelectorAll(".enb-state"), dead=[], offered={};
      function now(){var v=[];for(var i=0;i<sels.length;i++){v.push(sels[i].value);}return v.join("|");}
      for(var s=0;s<states.length;s++){
        for(var i=0;i<sels.length;i++){
          for(var o=0;o<sels[i].options.length;o++){
            window.location.hash=""; var k=states[s].getAttribute("data-state");
            document.querySelectorAll("button[data-step]")[0].click();   // any state, then the start:
            while(root.getAttribute("data-shown")!==k){document.querySelectorAll("button[data-step]")[1].click();}
            var opt=sels[i].options[o]; if(opt.disabled){continue;}
            sels[i].value=opt.value; sels[i].dispatchEvent(new Event("change"));
            if(!root.getAttribute("data-shown")){dead.push(now());}
            offered[now()]=1;
            if(sels[i].value!==opt.value){dead.push("moved "+now());}}}}
      var s0=sels[0]; s0.value="tree topk 2, 6 nodes"; s0.dispatchEvent(new Event("change"));
      document.body.setAttribute("data-dead", dead.join(";"));
      document.body.setAttribute("data-offered", Object.keys(offered).length);
      document.body.setAttribute("data-tree", now());
    </script></body>""")
    page = tmp_path / "s.html"
    page.write_text(html)
    dom = helpers.browser_dom(page.as_uri())
    assert 'data-dead=""' in dom
    assert f'data-offered="{len(sw.states)}"' in dom and len(sw.states) == 2 * 3 + 2
    assert 'data-tree="tree topk 2, 6 nodes|0|4"' in dom
    assert shown_states(dom) == ["shape=tree%20topk%202%2C%206%20nodes&temperature=0&depth=4"]
