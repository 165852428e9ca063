"""An executed notebook as a self-contained HTML page: widget state stripped, nothing loaded from
the network (every external URL removed), title and figures for the index. The page opens on the
title and question: the input of the parameters cells (the notebook's and papermill's injected
one) and of the cell tagged `remove-input` (each notebook's "Setup (no need to read)" cell) is
hidden, and one visible line says which parameters the run overrode. Knows nothing about
executing notebooks.
"""

from __future__ import annotations

import ast
import copy
import re

from eagle_nb.report.index_page import write_index  # noqa: F401 - phase 4 lives there

WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"


# The lab template without the blocks that load code from CDNs.
_TEMPLATE_NAME = "eagle_nb_report.html.j2"


_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{% block html_head_js_requirejs %}{% endblock html_head_js_requirejs %}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{% block html_head_js_mathjax %}{% endblock html_head_js_mathjax %}
{% block html_head_js_mermaidjs %}{% endblock html_head_js_mermaidjs %}
"""


# Cells whose input a report hides (their outputs stay): papermill's two parameters cells, and the
# setup cell, tagged in each notebook (tests/report/test_report_display.py checks the tag is there).
SETUP_TAG = "remove-input"
HIDDEN_INPUT_TAGS = ("parameters", "injected-parameters", SETUP_TAG)


# -- phase 3: self-contained HTML ---------------------------------------------------------------------
def parameters_note(nb) -> str:
    """One line of markdown naming the parameters the run overrode (papermill's injected cell), in
    the order they were given, or saying that it ran on the notebook's defaults."""
    given = []
    for cell in nb.cells:
        if cell.cell_type == "code" and "injected-parameters" in cell.metadata.get("tags", []):
            for node in ast.parse(cell.source).body:
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                    given.append(f"`{node.targets[0].id} = {ast.unparse(node.value)}`")
    return ("**Parameters** of this run: " + ", ".join(given) +
            "; every other parameter has its default (the parameters cell of the notebook)."
            if given else "**Parameters**: the notebook's defaults (its parameters cell).")


def with_parameters_note(nb):
    """A copy of `nb` with the parameters note as a markdown cell where the parameters cell was
    (after the title and question), tagged so that the export keeps it."""
    from nbformat.v4 import new_markdown_cell
    nb = copy.deepcopy(nb)
    at = next((i for i, c in enumerate(nb.cells) if set(HIDDEN_INPUT_TAGS[:2]) &
               set(c.metadata.get("tags", []))), None)
    if at is not None:
        note = new_markdown_cell(parameters_note(nb))
        note.metadata["tags"] = ["parameters-note"]
        nb.cells.insert(at, note)
    return nb


def strip_widgets(nb):
    """Drop widget state and live widget views. A view with an HTML fallback (the kit's panels)
    keeps the fallback; one without (progress bars) is removed."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for o in cell.get("outputs", []):
            data = o.get("data")
            if data and WIDGET_VIEW_MIME in data:
                del data[WIDGET_VIEW_MIME]
                if "text/html" not in data:
                    continue
            kept.append(o)
        cell.outputs = kept
    return nb


_EXTERNAL = r"""(?:https?:)?//[^"'\s>]+"""


_EXTERNAL_ATTR = re.compile(r"""\b(src|href)\s*=\s*["']?\s*(""" + _EXTERNAL + ")", re.I)


def external_urls(text: str) -> list[str]:
    """External URLs a page would load or link to: src/href attributes, CSS url(), import()."""
    found = [m.group(2) for m in _EXTERNAL_ATTR.finditer(text)]
    found += re.findall(r"""url\(\s*["']?(""" + _EXTERNAL + ")", text, re.I)
    found += re.findall(r"""@import\s+["'](""" + _EXTERNAL + ")", text, re.I)
    found += re.findall(r"""import\(\s*["'](""" + _EXTERNAL + ")", text, re.I)
    return found


def remove_external(text: str) -> str:
    """Remove <script src=...>/<link href=...> pointing off the page, turn external <a> links into
    plain text (the URL stays readable), and drop external CSS imports."""
    text = re.sub(r"""<script[^>]*\bsrc\s*=\s*["']?""" + _EXTERNAL + r"""[^>]*>\s*</script>""", "", text,
                  flags=re.I)
    text = re.sub(r"""<link[^>]*\bhref\s*=\s*["']?""" + _EXTERNAL + r"""[^>]*/?>""", "", text, flags=re.I)
    text = re.sub(r"""<a\b[^>]*\bhref\s*=\s*["']?(""" + _EXTERNAL + r""")["']?[^>]*>(.*?)</a>""",
                  lambda m: f"{m.group(2)} ({m.group(1)})", text, flags=re.I | re.S)
    text = re.sub(r"""@import\s+(?:url\()?["']?""" + _EXTERNAL + r"""["']?\)?\s*;""", "", text, flags=re.I)
    # the lab template's CSS carries attribution comments with URLs; nothing loads them, but a
    # report that "references no external URL" should not contain any
    text = re.sub(r"/\*(?:(?!\*/).)*?https?://(?:(?!\*/).)*?\*/", "", text, flags=re.S)
    return text


def to_html(nb) -> str:
    """Self-contained HTML of an executed notebook: images embedded, no network loads, parameters
    and setup code hidden behind a one-line parameters note. `nb` is not changed."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_input_tags = set(HIDDEN_INPUT_TAGS)
    exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})],
                            template_file=_TEMPLATE_NAME, embed_images=True, mathjax_url="",
                            require_js_url="", config=config)
    body, _ = exporter.from_notebook_node(strip_widgets(with_parameters_note(nb)))
    body = remove_external(body)
    left = [u for u in external_urls(body)]
    if left:
        raise RuntimeError(f"rendered report still references external URLs: {left[:5]}")
    return body


def notebook_title(nb) -> tuple[str, str]:
    """(title, goal): the first markdown heading, and the bold question of the paragraph after it
    (or the paragraph's first sentence)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            lines = [ln.strip() for ln in cell.source.splitlines()]
            title = next((ln.lstrip("# ") for ln in lines if ln.startswith("#")), "")
            para = " ".join(ln for ln in lines if not ln.startswith("#")).strip()
            bold = re.match(r"\*\*(.+?)\*\*", para)
            return title, (bold.group(1) if bold else para.split(". ")[0])
    return "", ""


# -- phase 4: index (index_page.py) ---------------------------------------------------------------------
def index_figures(nb) -> list[str]:
    """Base64 PNGs output by cells tagged `index-figure` (shown on the index page)."""
    return [o["data"]["image/png"] for c in nb.cells if "index-figure" in c.metadata.get("tags", [])
            for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
