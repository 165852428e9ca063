"""An executed notebook as a self-contained HTML page: widget state stripped, nothing loaded from
the network (every external URL removed), title and figures for the index. Knows nothing about
executing notebooks.
"""

from __future__ import annotations

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


# -- phase 3: self-contained HTML ---------------------------------------------------------------------
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
    """Self-contained HTML of an executed notebook: images embedded, no network loads."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({_TEMPLATE_NAME: _TEMPLATE})],
                            template_file=_TEMPLATE_NAME, embed_images=True, mathjax_url="",
                            require_js_url="")
    body, _ = exporter.from_notebook_node(strip_widgets(nb))
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
