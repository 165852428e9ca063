"""Execute the investigation notebooks headless and render self-contained HTML reports plus an index.

`build_reports(out_dir, params, notebooks)` works in four phases:
  1. resolve the notebooks and the parameters (CLI strings are type-inferred; relative paths made
     absolute, since the notebooks execute in `notebooks/`);
  2. execute each notebook with papermill, which injects the parameters after the cell tagged
     `parameters` and shows a progress bar over cells;
  3. export HTML with nbconvert's lab template minus every network load: require.js, MathJax,
     mermaid and the widget manager are cut from the template, widget views fall back to their
     static HTML (`switcher.StaticSwitcher` keeps the ablations explorable), and any remaining
     external <script>/<link> is removed and external links are turned into plain text;
  4. write `index.html` (the fault story, links, execution times, workloads, recorded results;
     `index_page.py`) and `results.json`.

Notebooks that declare a `precompute_report` parameter get True: they build the panels only a
report needs (with a live kernel they skip them).

`record(name, value)` is what a notebook calls to hand a number to this module (and to tests),
as scrapbook's `glue` does. Knows nothing about models.
"""
from __future__ import annotations

import ast
import html
import json
import os
import re
import time
from pathlib import Path

from .index_page import write_index  # noqa: F401 - phase 4 lives there

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"
RECORD_MIME = "application/vnd.eagle-nb.record+json"
WIDGET_VIEW_MIME = "application/vnd.jupyter.widget-view+json"

# The lab template without the blocks that load code from CDNs.
_TEMPLATE_NAME = "eagle_nb_report.html.j2"
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{% block html_head_js_requirejs %}{% endblock html_head_js_requirejs %}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{% block html_head_js_mathjax %}{% endblock html_head_js_mathjax %}
{% block html_head_js_mermaidjs %}{% endblock html_head_js_mermaidjs %}
"""


class ReportError(ValueError):
    """A notebook failed to execute; the report of the failure was still written."""


# -- recording results from inside a notebook -------------------------------------------------------
def record(name: str, value) -> None:
    """Display `value` under `name` so that `build_reports` (and tests) can read it back from the
    executed notebook. `value` must be JSON-serialisable."""
    from IPython.display import display
    text = json.dumps(value, default=str)
    shown = json.dumps(_rounded(json.loads(text)), ensure_ascii=False)
    if len(shown) > 240:        # never cut mid-value: say where the whole record is
        shown = f"{len(value) if hasattr(value, '__len__') else 1} entries (results.json, index.html)"
    display({RECORD_MIME: {name: json.loads(text)}, "text/plain": f"recorded {name} = {shown}"},
            raw=True)


def _rounded(v):
    """Floats rounded to 3 decimals, through dicts and lists (for display only)."""
    if isinstance(v, float):
        return round(v, 3)
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def workload_text(w: dict) -> str:
    """'8 prompts × 32 new tokens, k=4, T=0, seed 0' from a recorded workload."""
    ks = w["depths"]
    k = f"k={ks[0]}" if len(ks) == 1 else f"k={min(ks)}..{max(ks)}"
    T = "/".join(f"{t:g}" for t in w["temperatures"])
    return f"{w['prompts']} prompts × {w['max_new_tokens']} new tokens, {k}, T={T}, seed {w['seed']}"


def record_workload(n_prompts: int, max_new_tokens: int, depths, temperatures=(0.0,), seed: int = 0):
    """Print and record what a notebook's numbers were measured on, so every report states its
    workload next to its numbers (a tau measured on 8 x 32 differs from one on 16 x 64)."""
    w = {"prompts": int(n_prompts), "max_new_tokens": int(max_new_tokens),
         "depths": [int(k) for k in depths], "temperatures": [float(t) for t in temperatures],
         "seed": int(seed)}
    print(f"workload: {workload_text(w)}")
    record("workload", w)


def records(nb) -> dict:
    """Every value `record`ed in an executed notebook (nbformat node), by name."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if RECORD_MIME in data:
                out.update(data[RECORD_MIME])
    return out


# -- phase 1: notebooks and parameters ---------------------------------------------------------------
def list_notebooks(names=None) -> list[Path]:
    """The shipped notebooks (`notebooks/NN_*.ipynb`), or those matching `names` (a path, a stem,
    or a prefix such as "03")."""
    shipped = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return shipped
    out = []
    for n in names:
        p = Path(n)
        if p.suffix == ".ipynb" and p.exists():
            out.append(p.resolve())
            continue
        hits = [s for s in shipped if s.stem == n or s.stem.startswith(str(n))]
        if not hits:
            raise ValueError(f"no notebook matches {n!r}; shipped: {[s.stem for s in shipped]}")
        out.extend(hits)
    return out


def coerce(value):
    """A CLI parameter string to a Python value: None/true/false, numbers, lists; else the string."""
    if not isinstance(value, str):
        return value
    low = value.strip().lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def resolve_params(params: dict | None, cwd: Path | None = None) -> dict:
    """Coerce values; make `*_path` values that exist relative to `cwd` absolute."""
    cwd = Path(cwd or os.getcwd())
    out = {}
    for k, v in (params or {}).items():
        v = coerce(v)
        if k.endswith("_path") and isinstance(v, str) and (cwd / v).exists():
            v = str((cwd / v).resolve())
        out[k] = v
    return out


# -- phase 2: execution ------------------------------------------------------------------------------
# The kernel's own start-up warnings (e.g. "Kernel is running over TCP without encryption": the
# kernel only listens on 127.0.0.1) are noise for a report run; `verbose` keeps them.
QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR"]


def execute(src: Path, dst: Path, params: dict, progress: bool = True, timeout: int = 900,
            verbose: bool = False):
    """Run one notebook with papermill. Returns (seconds, error message or None)."""
    import papermill as pm
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env_path) if p)
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(str(src), str(dst), parameters=params, cwd=str(src.parent),
                            progress_bar=progress, execution_timeout=timeout,
                            extra_arguments=[] if verbose else QUIET_KERNEL)
        error = None
    except pm.PapermillExecutionError as e:
        error = f"{e.ename}: {e.evalue} (cell {e.exec_count})"
    except Exception as e:  # noqa: BLE001 - kernel died, timeout, bad notebook: report it, go on
        error = f"{type(e).__name__}: {e}"
    finally:
        if env_path:
            os.environ["PYTHONPATH"] = env_path
        else:
            os.environ.pop("PYTHONPATH", None)
    return time.perf_counter() - t0, error


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


def notebook_params(src: Path, params: dict) -> dict:
    """The parameters one notebook gets: `precompute_report=True` (the report-only panels) when
    the notebook declares it and the caller did not set it."""
    import nbformat
    nb = nbformat.read(src, as_version=4)
    declared = any("parameters" in c.metadata.get("tags", []) and
                   re.search(r"^precompute_report\s*=", c.source, re.M) for c in nb.cells)
    return {"precompute_report": True, **params} if declared else dict(params)


def build_reports(out_dir="reports", params: dict | None = None, notebooks=None,
                  progress: bool = True, verbose: bool = False) -> Path:
    """Execute the notebooks, write `<stem>.ipynb` (executed) and `<stem>.html` per notebook plus
    `index.html` and `results.json` into `out_dir`. Returns the index path. Raises ReportError
    (after writing everything) if any notebook failed."""
    from .params import check_out_dir, check_params
    check_out_dir(out_dir, NOTEBOOK_DIR)
    import nbformat
    srcs = list_notebooks(notebooks)
    params = resolve_params(params)
    check_params(params, srcs)          # unknown names and bad values, before anything executes
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows, t_all = [], time.perf_counter()
    for n, src in enumerate(srcs, 1):
        if progress:
            print(f"[{n}/{len(srcs)}] executing {src.name}", flush=True)
        dst = out / src.name
        seconds, error = execute(src, dst, notebook_params(src, params), progress=progress,
                                 verbose=verbose)
        nb = nbformat.read(dst if dst.exists() else src, as_version=4)
        title, goal = notebook_title(nb)
        page = to_html(nb) if dst.exists() else \
            f"<!DOCTYPE html><html><body><h1>{html.escape(src.stem)}</h1><pre>{html.escape(error)}</pre></body></html>"
        (out / f"{src.stem}.html").write_text(page, encoding="utf-8")
        rows.append({"name": src.stem, "title": title, "goal": goal, "seconds": seconds,
                     "error": error, "html": f"{src.stem}.html", "ipynb": src.name,
                     "records": records(nb), "figures": index_figures(nb) if dst.exists() else []})
        if progress:
            print(f"[{n}/{len(srcs)}] {src.stem}: {'ok' if error is None else error} "
                  f"in {seconds:.1f} s", flush=True)
    total = time.perf_counter() - t_all
    index = write_index(out, rows, params, total)
    (out / "results.json").write_text(json.dumps(
        {"total_seconds": total, "params": params,
         "notebooks": {r["name"]: {k: r[k] for k in ("seconds", "error", "records", "html")}
                       for r in rows}}, indent=2, default=str))
    failed = [r for r in rows if r["error"] is not None]
    if failed:
        raise ReportError(f"{len(failed)} notebook(s) failed: " + "; ".join(
            f"{r['name']}: {r['error']} (see {out / r['html']})" for r in failed))
    return index
