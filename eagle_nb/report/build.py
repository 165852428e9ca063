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

`report_value(name, value)` (values.py) is what a notebook calls to hand a number to this module (and to tests),
as scrapbook's `glue` does. Knows nothing about models.
"""

from __future__ import annotations

import html
import json
import time
from pathlib import Path

from eagle_nb.io.paths import NOTEBOOKS_DIR as NOTEBOOK_DIR
from eagle_nb.report.execute import (
    execute,
    list_notebooks,
    notebook_params,
    resolve_params,
)
from eagle_nb.report.html import index_figures, notebook_title, to_html
from eagle_nb.report.index_page import write_index  # noqa: F401 - phase 4 lives there
from eagle_nb.report.values import read_values


class ReportError(ValueError):
    """A notebook failed to execute; the report of the failure was still written."""


def build_reports(out_dir="reports", params: dict | None = None, notebooks=None,
                  progress: bool = True, verbose: bool = False) -> Path:
    """Execute the notebooks, write `<stem>.ipynb` (executed) and `<stem>.html` per notebook plus
    `index.html` and `results.json` into `out_dir`. Returns the index path. Raises ReportError
    (after writing everything) if any notebook failed."""
    from eagle_nb.report.params import check_out_dir, check_params
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
                     "records": read_values(nb), "figures": index_figures(nb) if dst.exists() else []})
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
