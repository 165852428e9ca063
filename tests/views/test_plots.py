"""Tests for eagle_nb.views.plots: every function returns a Figure (or DataFrame) built from result objects,
draws nothing globally, and shows the numbers it was given (measured and published).

Results are hand-made SpecStats with fixed accepted counts, so every expected value is exact. CPU,
no model runs except a tiny random Llama for the capture plot.
"""
from __future__ import annotations

import base64

import matplotlib
import pytest
import torch
from matplotlib.figure import Figure

from eagle_nb.views import model_plots, palette, plots
from eagle_nb.model.capture import CapturedStates, capture
from eagle_nb.checkpoints.save import save_drafter
from eagle_nb.checkpoints.inspect import inspect_checkpoint
from eagle_nb.loop.metrics import from_stats, sglang_log_line
from eagle_nb.experiment.results import RunResult
from eagle_nb.experiment.setting import Setting
from eagle_nb.loop.chain import SpecStats, VerifyStep
import helpers
from helpers import tiny_drafter, tiny_llama

matplotlib.use("Agg")


def fake_result(counts, depth=4, name="x", temperature=0.0) -> RunResult:
    """A RunResult whose single prompt had verify steps accepting `counts` drafts."""
    steps = [VerifyStep(a, draft_tokens=[10 + i for i in range(depth)],
                        target_tokens=[10 + i if i < a else 99 for i in range(depth + 1)]) for a in counts]
    st = SpecStats(depth, temperature, prompt_len=5, tokens=list(range(sum(counts) + len(counts))),
                   steps=steps, total_s=1.0)
    return RunResult(Setting(depth=depth, temperature=temperature), ["p"], ["out"], [st],
                     from_stats([st]))


@pytest.fixture
def pyplot_figures():
    """Number of pyplot-managed figures before the test (must be unchanged after)."""
    import matplotlib.pyplot as plt
    before = plt.get_fignums()
    yield lambda: plt.get_fignums()
    assert plt.get_fignums() == before


def test_plot_acceptance_one_series_per_setting(pyplot_figures):
    """Three panels (per-position, n-alpha, histogram); each setting is one labelled series with its
    tau; per-position bar heights equal the metrics; no pyplot figure is created."""
    res = {"healthy": fake_result([4, 3, 4, 2]), "fc-bypass": fake_result([0, 0, 1, 0])}
    fig = plots.plot_acceptance(res, title="t")
    assert isinstance(fig, Figure)
    a, b, c = fig.axes[:3]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["healthy (τ=4.25)", "fc-bypass (τ=1.25)"]
    heights = [p.get_height() for p in a.patches]
    m = res["healthy"].metrics
    assert heights[:4] == pytest.approx(m.per_position_acceptance)
    assert len(b.lines) == 2 and len(c.patches) == 2 * 5


def test_plot_acceptance_mixed_depths():
    """Settings may have different depths."""
    fig = plots.plot_acceptance({"k2": fake_result([2, 1], 2), "k5": fake_result([5, 0], 5)})
    assert len(fig.axes[0].patches) == 2 + 5


def test_tau_vs_depth_draws_measured_and_published_curves():
    """Measured tau per k, the k+1 bound, and the published vLLM chain curves (anchors docs/drafter.md) with
    their exact values; the n-alpha panel carries EAGLE-1 Table 2."""
    curves = {"healthy, T=0": {k: fake_result([k] * 3, depth=k) for k in (1, 2, 3)},
              "bypass, T=0": {k: fake_result([0, 0, 1, 0, 0, 0, 0, 0, 0, 0], depth=k) for k in (1, 2, 3)}}
    fig = plots.plot_tau_vs_depth(curves)
    a, b = fig.axes[:2]
    lines = {ln.get_label(): ln for ln in a.lines}
    assert list(lines["healthy, T=0"].get_ydata()) == [2.0, 3.0, 4.0]
    assert list(lines["bypass, T=0"].get_ydata()) == pytest.approx([1.1, 1.1, 1.1])
    eagle3 = lines["published: vLLM EAGLE-3 chain, Llama-3.1-8B, MT-bench, T=0"]
    assert list(eagle3.get_xdata()) == [2, 3, 4, 5, 6, 7]
    assert list(eagle3.get_ydata()) == [2.36, 2.79, 3.08, 3.32, 3.46, 3.54]
    assert list(lines["published: vLLM EAGLE-1 chain, Llama-3.1-8B, MT-bench, T=0"].get_ydata()) == \
        [2.10, 2.29, 2.39, 2.43, 2.45, 2.47]
    assert "bound k+1 (all accepted)" in lines
    alpha = {ln.get_label(): list(ln.get_ydata()) for ln in b.lines}
    assert alpha["published: EAGLE-1 Vicuna 7B, T=0"] == [0.79, 0.74, 0.72, 0.73, 0.67]


def test_tau_table_and_depth_overview():
    """tau_table has one row per depth and one column per curve; the overview has two panels."""
    curves = {"a": {1: fake_result([1], 1), 2: fake_result([0], 2)}}
    t = plots.tau_table(curves)
    assert t.loc[1, "a"] == 2.0 and t.loc[2, "a"] == 1.0
    fig = plots.plot_depth_overview(curves, {"a": curves["a"][2]}, 2)
    assert len(fig.axes) == 2


def test_metrics_table_has_every_metric_and_log_lines():
    """One column per setting; tau, SGLang's two accept rates and the SGLang log line match the
    metrics module; log_lines shows SGLang (both formulas) and vLLM."""
    r = fake_result([4, 0, 2, 1])
    m = r.metrics
    t = plots.metrics_table({"s": r})
    col = t["s"]
    assert col["tau: accept length (1 + accepted/steps)"] == round(m.accept_length, 3)
    assert col["SGLang accept rate = len/(k+1) (PR #13212)"] == round(m.sglang_accept_rate_by_draft_tokens, 3)
    assert col["vLLM avg draft acceptance rate"] == f"{100 * m.draft_acceptance_rate:.1f}%"
    assert col["SGLang log line"] == sglang_log_line(m, label=True)
    assert "EAGLE n-alpha (conditional)" in t.index and "accepted-count histogram m=0..k" in t.index
    lines = plots.log_lines({"s": r})
    assert lines.loc["s", "SGLang (accepted/drafted)"] == sglang_log_line(m, "by_drafts", label=True)
    assert lines.loc["s", "vLLM"].startswith("SpecDecoding metrics: Mean acceptance length: 2.75")


def test_trace_table_marks_accepted_rejected_unchecked():
    """✓ for accepted drafts, ✗ for the first rejection, · after it; the target token is labelled a
    correction after a rejection and a bonus after a fully accepted chain."""
    t = plots.trace_table(fake_result([2, 4], depth=4))
    assert t.loc[0, "drafts"].split() == ["✓'10'", "✓'11'", "✗'12'", "·'13'"]
    assert t.loc[0, "target token"] == "'99' (correction)"
    assert t.loc[1, "target token"] == "'99' (bonus)" and t.loc[1, "accepted"] == 4


def test_plot_trace_grid_colours_follow_acceptance():
    """The trace grid has a row per verify step and k+1 columns; its cell classes are
    accepted (1), rejected (2), unchecked (0) and the target column (3)."""
    fig = plots.plot_trace(fake_result([2, 0, 4], depth=4))
    grid = fig.axes[0].images[0].get_array()
    assert grid.shape == (3, 5)
    assert grid[0].tolist() == [1, 1, 2, 0, 3]
    assert grid[1].tolist() == [2, 0, 0, 0, 3]
    assert grid[2].tolist() == [1, 1, 1, 1, 3]


def test_plot_layer_norms_from_captured_states():
    """One bar per captured layer, heights = mean per-token norm; EAGLE-3 layers are highlighted."""
    model = tiny_llama(num_layers=8)
    with torch.no_grad(), capture(model, range(9)) as states:
        model(torch.arange(12)[None])
    fig = model_plots.plot_layer_norms(states, highlight=(2, 4, 5))
    ax = fig.axes[0]
    assert len(ax.patches) == 9
    assert ax.patches[3].get_height() == pytest.approx(float(states[3].norm(dim=-1).mean()), rel=1e-5)
    colors = {i: ax.patches[i].get_facecolor() for i in (1, 2)}
    assert colors[1] != colors[2]


def test_layer_id_table_conventions():
    """HF-like conventions show the HF ids; SGLang-config and SpecForge show them minus one."""
    t = model_plots.layer_id_table([2, 16, 29], 32)
    assert t.loc["hf", ["low", "mid", "high"]].tolist() == [2, 16, 29]
    assert t.loc["sglang-config", ["low", "mid", "high"]].tolist() == [1, 15, 28]
    assert t.loc["specforge", "low"] == 1 and t.loc["vllm", "high"] == 29


def test_d2t_plot_and_table_show_offsets():
    """Target id = draft id + d2t offset in the table and the plot; the wrong reading uses d2t alone."""
    d = tiny_drafter()
    t = model_plots.d2t_table(d, n=6)
    assert (t["target id = i + d2t[i]"] == t["draft id"] + t["d2t[i] (offset)"]).all()
    assert t["t2d[target id]"].all()

    class Tok:   # the two calls _tok makes; id 7 does not decode alone
        def decode(self, ids):
            return "\ufffd" if ids == [7] else f"<{ids[0]}>"

        def convert_ids_to_tokens(self, i):
            return f"piece{i}"
    named = model_plots.d2t_table(d, Tok(), n=6)
    assert named["token"].tolist() == [f"piece{i}" if i == 7 else f"<{i}>"
                                       for i in named["target id = i + d2t[i]"]]
    fig = model_plots.plot_d2t_offsets(d.d2t, d.config.vocab_size, verdict="offsets (ok)")
    right = {ln.get_label(): ln for ln in fig.axes[1].lines}
    correct = right["target id = i + d2t[i] (correct)"].get_ydata()
    assert list(correct) == (torch.arange(d.d2t.numel()) + d.d2t).tolist()


def test_key_names_and_config_tables_align_formats(tmp_path):
    """The same tensor sits on one row under each format's name (midlayer.* vs layers.0.*), and
    config_table shows each file's format and where it wrote the layer ids."""
    d = tiny_drafter()
    a = save_drafter(d, tmp_path / "a", "eagle")
    b = save_drafter(d, tmp_path / "b", "sglang")
    c = save_drafter(d, tmp_path / "c", "speculators")
    reports = {n: inspect_checkpoint(p)[0] for n, p in {"A": a, "B": b, "C": c}.items()}
    t = model_plots.key_names_table({n: reports[n] for n in ("A", "C")})
    row = t.loc["midlayer.self_attn.q_proj.weight"]
    assert row["A [eagle]"] == "midlayer.self_attn.q_proj.weight"
    assert row["C [speculators]"] == "layers.0.self_attn.q_proj.weight"
    assert t.loc["embed_tokens.weight", "A [eagle]"] == "—"
    cfg = model_plots.config_table(reports)
    assert cfg.loc["format"].tolist() == ["eagle", "sglang", "speculators"]
    assert cfg.loc["layer ids as written", "B"].startswith("eagle_config: [1, 3, 4]")
    assert cfg.loc["layer ids as written", "C"].startswith("top level: [2, 4, 5]")


def test_figure_to_data_uri_is_png():
    """Embedded figures are base64 PNG data URIs (self-contained HTML)."""
    uri = plots.figure_to_data_uri(plots.plot_acceptance({"a": fake_result([1], 1)}))
    assert uri.startswith("data:image/png;base64,")
    assert base64.b64decode(uri.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_dollar_signs_in_tokens_do_not_break_rendering():
    """Token text with `$` (mathtext in matplotlib) still renders."""
    class Tok:
        def decode(self, ids):
            return "$x$ $"
    fig = plots.plot_trace(fake_result([1], depth=2), tokenizer=Tok())
    plots.figure_to_png(fig)


def test_captured_states_without_forward_raise():
    """A plot of states that were never captured fails with the capture module's message."""
    st = CapturedStates([1], 2, "model.layers", "X")
    with pytest.raises(KeyError, match="no forward ran"):
        model_plots.plot_layer_norms(st)


def test_n_alpha_points_need_enough_support():
    """Conditional alpha at a position reached by fewer than MIN_TRIED verify steps is not drawn
    (one lucky step would plot alpha = 1.0)."""
    fig = plots.plot_acceptance({"a": fake_result([0] * 10 + [4], 4)})   # positions 1..3 reached once
    line = fig.axes[1].lines[0]
    assert list(line.get_xdata()) == [1] and list(line.get_ydata()) == [pytest.approx(1 / 11)]


# -- legibility: every figure at the size it is shown -------------------------------------------------
def _results():
    res = {"healthy": fake_result([4, 3, 4, 2, 4, 4, 1, 4]),
           "fc-bypass": fake_result([0, 0, 1, 0, 0, 2, 0, 0])}
    for f in ("d2t-absolute", "wrapper-capture", "layers0-keys-dropped", "layer-ids+1", "layer-ids-1"):
        res[f] = fake_result([1, 0, 2, 0, 3, 1, 0, 0])
    return res


def _curves():
    return {f"{n}, T={T:g}": {k: fake_result([min(k, a) for a in (4, 3, 4, 2, 1, 4)], depth=k,
                                             temperature=T) for k in range(1, 9)}
            for n in ("healthy", "fc-bypass") for T in (0.0, 1.0)}


def _trace_result():
    depth = 8
    toks = ["assertEqual", "self", "(", "$x", "\n    ", "return", "None", ")", "def"]
    steps = [VerifyStep(a, draft_tokens=list(range(depth)), target_tokens=list(range(depth + 1)))
             for a in (8, 2, 0, 5, 8, 1, 3, 0, 7, 4, 8, 2)]
    st = SpecStats(depth, 0.0, 5, tokens=list(range(60)), steps=steps, total_s=1.0)
    r = RunResult(Setting(depth=depth), ["p"], ["o"], [st], from_stats([st]))

    class Tok:
        def decode(self, ids):
            return toks[ids[0]] * (3 if ids[0] == 0 else 1)      # one very long token

        def convert_ids_to_tokens(self, i):
            return toks[i]
    return r, Tok()


def _figures():
    res, curves = _results(), _curves()
    r, tok = _trace_result()
    L = 8
    model = tiny_llama(num_layers=L)
    with torch.no_grad(), capture(model, range(L + 1)) as states:
        model(input_ids=torch.tensor([[1, 2, 3, 4]]))
    d2t = torch.arange(64) * 3
    return {
        "acceptance": plots.plot_acceptance({k: res[k] for k in ("healthy", "fc-bypass")}, title="t"),
        "acceptance, seven settings": plots.plot_acceptance(res, title="every fault, k=8, T=0"),
        "tau vs depth": plots.plot_tau_vs_depth(curves),
        "depth overview": plots.plot_depth_overview(
            {k: v for k, v in curves.items() if k.endswith("T=1")},
            {"healthy": res["healthy"], "fc-bypass": res["fc-bypass"]}, 4),
        "fault cost": plots.plot_fault_cost(res, title="which fault costs how much, k=8"),
        "per position": plots.plot_per_position(res),
        "trace": plots.plot_trace(r, tok, max_steps=12),
        "layer norms": model_plots.plot_layer_norms(states, highlight=[2, 4, 5]),
        "d2t": model_plots.plot_d2t_offsets(d2t, vocab_size=256, verdict="offsets (ok)"),
    }


def test_every_figure_is_legible_at_its_shown_size():
    """Every text of every figure is >= 7 pt at the size the figure is shown (PNG at palette.DPI,
    scaled to palette.SHOWN_WIDTH_PX when wider), inside the figure, and not printed over another."""
    problems = {name: helpers.legibility_problems(fig) for name, fig in _figures().items()}
    assert {n: p for n, p in problems.items() if p} == {}


def test_legibility_check_catches_small_cut_and_overprinted_text():
    """The check itself fails on a 6 pt legend, a label past the edge and two texts on one spot."""
    fig = plots.new_figure((4, 3))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="tiny legend")
    ax.legend(fontsize=6)
    ax.text(0.5, 0.5, "one label", fontsize=9)
    ax.text(0.5, 0.5, "another label", fontsize=9)
    fig.text(0.95, 0.5, "cut at the right edge", fontsize=9)
    probs = " | ".join(helpers.legibility_problems(fig))
    assert "'tiny legend' shown at 6.0 pt" in probs
    assert "cut by the figure edge" in probs and "'another label' printed over 'one label'" in probs


def test_one_palette_and_one_position_axis():
    """Healthy has one colour in every figure, each fault its own; published curves are grey and
    dashed, labelled with their conditions; n-alpha x axes count draft positions from 1."""
    res, curves = _results(), _curves()
    assert len({plots.color(n) for n in res}) == len(res)
    acc = plots.plot_acceptance({k: res[k] for k in ("healthy", "fc-bypass")})
    tvd = plots.plot_tau_vs_depth(curves)
    bar_colors = {matplotlib.colors.to_hex(p.get_facecolor()) for p in acc.axes[0].patches}
    assert bar_colors == {palette.HEALTHY_COLOR, palette.fault_color("fc-bypass")}
    lines = {ln.get_label(): ln for ln in tvd.axes[0].lines}
    assert lines["healthy, T=0"].get_color() == lines["healthy, T=1"].get_color() == palette.HEALTHY_COLOR
    assert lines["healthy, T=1"].get_linestyle() == "--"
    refs = [ln for lab, ln in lines.items() if lab.startswith("published:")]
    assert refs and all(ln.get_color() == palette.REFERENCE_STYLE["color"] and "T=0" in ln.get_label()
                        for ln in refs)
    for ax in (acc.axes[1], tvd.axes[1]):
        xs = [x for ln in ax.lines for x in ln.get_xdata()]
        assert min(xs) == 1 and "draft position" in ax.get_xlabel()


def test_plot_acceptance_tells_every_setting_apart():
    """Notebook 04's figure at the largest depth (`Sweep.at`: healthy and fc-bypass at T = 0 and
    T = 1): every setting has its own bar style and line style; the colour follows the faults
    (edges), the hatch and the line style the temperature; a tree is told from its chain."""
    from matplotlib.colors import to_hex
    res = {f"{f}, T={T:g}": fake_result([4, 2, 1, 0], temperature=T)
           for f in ("healthy", "fc-bypass") for T in (0.0, 1.0)}
    fig = plots.plot_acceptance(res)
    a, b = fig.axes[:2]
    bars = [{(to_hex(p.get_facecolor()), to_hex(p.get_edgecolor()), p.get_hatch())
             for p in a.patches[4 * j: 4 * j + 4]} for j in range(4)]
    assert all(len(s) == 1 for s in bars) and len({s.pop() for s in bars}) == 4
    edges = [to_hex(p.get_edgecolor()) for p in a.patches[::4]]
    assert edges == [palette.HEALTHY_COLOR] * 2 + [palette.fault_color("fc-bypass")] * 2
    assert [p.get_hatch() for p in a.patches[::4]] == [None, "///", None, "///"]
    lines = [(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in b.lines]
    assert len(set(lines)) == 4 and [ls for _, ls, _ in lines] == ["-", "--", "-", "--"]
    shapes = {"healthy, tree topk 2, 6 nodes": fake_result([4, 2]), "healthy, chain": fake_result([3, 1])}
    a = plots.plot_acceptance(shapes).axes[0]
    assert {to_hex(p.get_edgecolor()) for p in a.patches} == {palette.HEALTHY_COLOR}
    assert a.patches[0].get_hatch() == ".." and a.patches[4].get_hatch() is None


def test_every_sglang_accept_rate_names_its_formula(tmp_path):
    """SGLang printed two accept rates (len/(k+1) up to 0.5.10, accepted/proposed drafts from
    0.5.11): wherever one is shown (the metrics table, the log-line table, a line a notebook
    records and the index page shows) its formula is named beside it, and the index shows the
    quantity the notebook's table names."""
    from eagle_nb.loop.metrics import SGLANG_RATE_FORMULAS
    from eagle_nb.report.index_page import write_index
    runs = {"healthy": fake_result([4, 2, 1, 3]), "fc-bypass": fake_result([0, 1, 0, 0])}
    table, lines = plots.metrics_table(runs), plots.log_lines(runs)
    shown = [(label, str(v)) for label, row in table.iterrows() for v in row
             if "SGLang" in label and "rate" in (label + str(v))]
    shown += [(c, v) for c in lines.columns if c.startswith("SGLang") for v in lines[c]]
    assert len(shown) == 8
    for label, v in shown:
        named = [f for f, text in SGLANG_RATE_FORMULAS.items() if text in v] or \
            (["by_draft_tokens"] if "len/(k+1)" in label else [])
        assert len(named) == 1, (label, v)
    # notebook 03 records the len/(k+1) line; the index page shows it with its formula
    recorded = {n: lines.loc[n, "SGLang (len/(k+1))"] for n in runs}
    row = {"name": "03_x", "title": "03", "goal": "", "seconds": 1.0, "error": None, "html": "03_x.html",
           "ipynb": "03_x.ipynb", "records": {"sglang_log_line": recorded}}
    page = write_index(tmp_path, [row], {}, 1.0).read_text()
    assert page.count(SGLANG_RATE_FORMULAS["by_draft_tokens"].replace(">", "&gt;").replace("<", "&lt;")) == 2
    rate = f"accept rate: {runs['healthy'].metrics.sglang_accept_rate_by_draft_tokens:.2f}"
    assert rate in page and rate in lines.loc["healthy", "SGLang (len/(k+1))"]
    assert table.loc["SGLang accept rate = len/(k+1) (PR #13212)", "healthy"] == \
        round(runs["healthy"].metrics.sglang_accept_rate_by_draft_tokens, 3)
