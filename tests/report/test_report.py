"""Tests for eagle_nb.report.build on small synthetic notebooks: parameters reach the notebook, recorded
values come back, widget state and every network load are stripped from the HTML, failures are
reported after everything is written.

The two build tests start a real kernel through papermill (a few seconds each); the notebooks
themselves are tested in test_notebooks.py.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from eagle_nb.report import build as report_build
from eagle_nb.report import execute as report_execute
from eagle_nb.report import html as report_html
from eagle_nb.report import values as report_values
from helpers import long_floats

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def tiny_notebook(body: str = "report_value('double', 2 * x)") -> nbformat.NotebookNode:
    params = new_code_cell("x = 1  # a parameter")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# Tiny\n\nGoal: double x."), params,
                             new_code_cell("from eagle_nb import report_value"), new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def test_coerce_and_resolve_params(tmp_path):
    """CLI strings become Python values; *_path values that exist are made absolute (the notebooks
    run in notebooks/, not the caller's directory)."""
    assert [report_execute.coerce(v) for v in ("4", "0.5", "None", "true", "[2, 4]", "auto", "data/x")] == \
        [4, 0.5, None, True, [2, 4], "auto", "data/x"]
    (tmp_path / "t").mkdir()
    p = report_execute.resolve_params({"target_path": "t", "other_path": "missing", "n_prompts": "3"}, cwd=tmp_path)
    assert p == {"target_path": str((tmp_path / "t").resolve()), "other_path": "missing", "n_prompts": 3}


def test_list_notebooks_by_prefix_and_errors():
    """Default: the shipped notebooks in order; a prefix selects one; an unknown name fails."""
    names = [p.stem for p in report_execute.list_notebooks()]
    assert names == ["01_load_checkpoints", "02_hidden_state_shapes", "03_fc_bypass_ablation",
                     "04_acceptance_vs_depth", "05_engine_vs_reference", "06_doctor",
                     "07_serving_conditions"]
    assert [p.stem for p in report_execute.list_notebooks(["03"])] == ["03_fc_bypass_ablation"]
    with pytest.raises(ValueError, match="no notebook matches"):
        report_execute.list_notebooks(["99_nope"])


def test_strip_widgets_keeps_html_fallbacks_only():
    """Widget state metadata goes; a widget view with an HTML fallback keeps the fallback; a view
    without one (a progress bar) is dropped; other outputs are untouched."""
    nb = tiny_notebook()
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    nb.cells[3].outputs = [
        new_output("display_data", data={report_html.WIDGET_VIEW_MIME: view, "text/plain": "HBox()"}),
        new_output("display_data", data={report_html.WIDGET_VIEW_MIME: view, "text/plain": "VBox()",
                                         "text/html": "<p>snapshot</p>"}),
        new_output("stream", name="stdout", text="hi\n")]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    report_html.strip_widgets(nb)
    assert "widgets" not in nb.metadata
    outs = nb.cells[3].outputs
    assert len(outs) == 2 and outs[0]["data"] == {"text/plain": "VBox()", "text/html": "<p>snapshot</p>"}


def test_remove_external_strips_loads_and_links():
    """Off-page <script src>, <link href>, CSS @import and url() are removed or flagged; external
    <a> links become text; page-internal anchors and data URIs stay."""
    html = ('<script src="https://cdn.x/require.js"></script><link rel="stylesheet" href="//cdn.x/a.css">'
            '<style>@import url("https://fonts.x/f.css");</style><a href="https://github.com/x">src</a>'
            '<a href="#sec">here</a><img src="data:image/png;base64,AAAA">')
    assert len(report_html.external_urls(html)) == 4
    clean = report_html.remove_external(html)
    assert report_html.external_urls(clean) == []
    assert "src (https://github.com/x)" in clean and 'href="#sec"' in clean and "data:image/png" in clean


def test_to_html_is_self_contained():
    """The exported page embeds images, loads no require.js/MathJax/widget manager and has no
    external src/href, even for a notebook that stored widget state."""
    nb = tiny_notebook()
    nb.cells[3].outputs = [new_output("display_data", data={"image/png": PNG, "text/plain": "fig"})]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    html = report_html.to_html(nb)
    assert html.count("<img") == 1 and "data:image/png;base64," in html
    assert report_html.external_urls(html) == []
    for needle in ("require.js", "require.min.js", "mathjax", "MathJax.js", "html-manager", "unpkg"):
        assert needle not in html


def test_records_read_back_from_outputs():
    """Values displayed by `record` are found in the executed notebook's outputs."""
    nb = tiny_notebook()
    nb.cells[3].outputs = [new_output("display_data", data={report_values.RECORD_MIME: {"a": 1}, "text/plain": "."}),
                           new_output("display_data", data={report_values.RECORD_MIME: {"b": [2]}, "text/plain": "."})]
    assert report_values.read_values(nb) == {"a": 1, "b": [2]}


def test_build_reports_injects_params_and_writes_index(tmp_path, capfd):
    """A notebook executes with the injected parameter, its recorded value lands in results.json,
    and index.html links the report with its execution time; the kernel's start-up warnings are
    not printed."""
    src = tmp_path / "nb" / "01_tiny.ipynb"
    src.parent.mkdir()
    nbformat.write(tiny_notebook(), src)
    index = report_build.build_reports(tmp_path / "out", params={"x": "21"}, notebooks=[str(src)], progress=False)
    err = capfd.readouterr().err
    assert "WARNING" not in err and "encryption" not in err, err
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["notebooks"]["01_tiny"]["records"] == {"double": 42}
    assert res["notebooks"]["01_tiny"]["error"] is None and res["params"] == {"x": 21}
    page = index.read_text()
    assert "href='01_tiny.html'" in page and "Tiny" in page and " s</td>" in page
    html = (tmp_path / "out" / "01_tiny.html").read_text()
    assert "recorded double = 42" in html and report_html.external_urls(html) == []


def test_parallel_build_equals_one_at_a_time(tmp_path, monkeypatch):
    """Two notebooks at a time (worker processes, one thread per kernel) record what one at a time
    records, come back in notebook order, and leave the caller's directory and environment as they
    were; a failing one is still reported by name."""
    srcs = []
    for name, body in (("01_a", "import os; report_value('threads', os.environ['OMP_NUM_THREADS']); "
                                "report_value('double', 2 * x)"), ("03_c", "raise RuntimeError('boom')")):
        srcs.append(tmp_path / "nb" / f"{name}.ipynb")
        srcs[-1].parent.mkdir(exist_ok=True)
        nbformat.write(tiny_notebook(body), srcs[-1])
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with pytest.raises(report_build.ReportError, match="03_c: RuntimeError: boom"):
        report_build.build_reports("out", params={"x": 4}, notebooks=[str(s) for s in srcs],
                                   progress=False, jobs=2)
    assert Path.cwd() == tmp_path and "OMP_NUM_THREADS" not in os.environ
    res = json.loads((tmp_path / "out" / "results.json").read_text())["notebooks"]
    assert list(res) == ["01_a", "03_c"]
    assert res["01_a"]["records"] == {"threads": "1", "double": 8}
    assert (tmp_path / "out" / "03_c.html").exists()


def test_schedule_is_longest_first():
    """By the last build's seconds when every notebook has one, else the engine notebook first and
    the rest from the last."""
    srcs = [Path(f"{n}.ipynb") for n in ("01_a", "02_b", "05_engine_x", "06_d")]
    out = Path("/nonexistent")
    assert [s.stem for s in report_build.schedule(srcs, out)] == ["05_engine_x", "06_d", "02_b", "01_a"]


def test_build_reports_failure_is_reported_after_writing(tmp_path):
    """A failing cell raises ReportError naming the notebook, after its HTML and the index exist."""
    src = tmp_path / "02_bad.ipynb"
    nbformat.write(tiny_notebook("raise RuntimeError('boom')"), src)
    with pytest.raises(report_build.ReportError, match="02_bad: RuntimeError: boom"):
        report_build.build_reports(tmp_path / "out", notebooks=[str(src)], progress=False)
    assert (tmp_path / "out" / "02_bad.html").exists()
    assert "error: RuntimeError: boom" in (tmp_path / "out" / "index.html").read_text()


def test_index_tells_the_fault_story_with_rounded_numbers_and_state_links(tmp_path):
    """The index shows the fault-cost figure, a tau table whose cells link to the precomputed
    states (URL fragments), every workload, goals rendered from markdown, and no float with more
    than 4 decimals; the check itself catches a raw float."""
    from eagle_nb.report import index_page
    rec03 = {"workload": {"prompts": 8, "max_new_tokens": 32, "depths": [4], "temperatures": [0.0], "seed": 0},
             "tau": {"healthy": 2.7234567891234567, "fc-bypass": 1.7012345678901234},
             "precomputed_tau": {"healthy, k=2": 2.1234567, "healthy, k=4": 2.7234567,
                                 "layer-ids+1, k=2": 1.9876543, "layer-ids+1, k=4": 2.4567891},
             "flags": {"ok": True}}
    rec04 = {"tau_vs_depth": {"healthy, T=0": {"1": 1.812345678, "2": 2.3456789}},
             "workload": {"prompts": 8, "max_new_tokens": 32, "depths": [1, 2], "temperatures": [0.0, 1.0],
                          "seed": 0}}
    rows = [{"name": "03_fc_bypass_ablation", "title": "03 · ablation", "goal": "what does `fc` do? **bold**",
             "seconds": 12.34, "error": None, "html": "03_fc_bypass_ablation.html",
             "ipynb": "03_fc_bypass_ablation.ipynb", "records": rec03, "figures": [PNG]},
            {"name": "04_acceptance_vs_depth", "title": "04", "goal": "depth", "seconds": 3.0,
             "error": None, "html": "04_acceptance_vs_depth.html", "ipynb": "04.ipynb", "records": rec04}]
    page = index_page.write_index(tmp_path, rows, {"n_prompts": 8, "x": 0.123456789}, 15.5).read_text()
    assert long_floats(page) == [] and long_floats("<td>2.7234567891</td>") == ["2.7234567891"]
    assert f"src='data:image/png;base64,{PNG}'" in page and "Which fault costs how much" in page
    assert "href='03_fc_bypass_ablation.html#fault=layer-ids%2B1&amp;depth=4'>2.46</a>" in page
    assert page.count("8 prompts × 32 new tokens, k=4, T=0, seed 0") == 2      # story + row
    assert "8 prompts × 32 new tokens, k=1..2, T=0/1, seed 0" in page
    assert "<code>fc</code>" in page and "<b>bold</b>" in page and "`" not in page
    assert "<td class='num'>2.723</td>" in page and "<td class='num'>yes</td>" in page
    assert report_html.external_urls(page) == []


def test_record_display_rounds_and_never_cuts(capsys):
    """A record's visible text rounds floats; a long one says where it is kept instead of cutting it."""
    from unittest import mock
    shown = []
    with mock.patch("IPython.display.display", lambda d, raw: shown.append(d["text/plain"])):
        report_values.report_value("tau", {"healthy": 3.0412345678})
        report_values.report_value("big", {f"k{i}": 1.23456789 for i in range(40)})
    assert shown[0] == 'recorded tau = {"healthy": 3.041}'
    assert shown[1] == "recorded big = 40 entries (results.json, index.html)"


def test_precompute_report_is_set_only_where_declared(tmp_path):
    """Notebooks declaring `precompute_report` get True from build_reports (unless given); others
    get nothing extra."""
    nb = tiny_notebook()
    nb.cells[1].source += "\nprecompute_report = False"
    nbformat.write(nb, tmp_path / "a.ipynb")
    nbformat.write(tiny_notebook(), tmp_path / "b.ipynb")
    assert report_execute.notebook_params(tmp_path / "a.ipynb", {"x": 2}) == {"precompute_report": True, "x": 2}
    assert report_execute.notebook_params(tmp_path / "a.ipynb", {"precompute_report": False}) == {"precompute_report": False}
    assert report_execute.notebook_params(tmp_path / "b.ipynb", {"x": 2}) == {"x": 2}
