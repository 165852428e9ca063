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
    default_jobs,
    execute,
    kernel_env,
    list_notebooks,
    notebook_params,
    resolve_params,
)
from eagle_nb.report.html import index_figures, notebook_title, to_html
from eagle_nb.report.index_page import write_index  # noqa: F401 - phase 4 lives there
from eagle_nb.report.values import read_values


class ReportError(ValueError):
    """A notebook failed to execute; the report of the failure was still written."""


def render(src: Path, out: Path, params: dict, progress: bool, verbose: bool) -> dict:
    """Execute one notebook into `out` and render its HTML; its row of the index."""
    import nbformat
    dst = out / src.name
    seconds, error = execute(src, dst, notebook_params(src, params), progress=progress, verbose=verbose)
    nb = nbformat.read(dst if dst.exists() else src, as_version=4)
    title, goal = notebook_title(nb)
    page = to_html(nb) if dst.exists() else \
        f"<!DOCTYPE html><html><body><h1>{html.escape(src.stem)}</h1><pre>{html.escape(error)}</pre></body></html>"
    (out / f"{src.stem}.html").write_text(page, encoding="utf-8")
    return {"name": src.stem, "title": title, "goal": goal, "seconds": seconds,
            "error": error, "html": f"{src.stem}.html", "ipynb": src.name,
            "records": read_values(nb), "figures": index_figures(nb) if dst.exists() else []}


def schedule(srcs, out: Path) -> list:
    """Longest first: by the seconds each notebook took in the last build into `out` (its
    results.json), else the engine notebook (two vLLM start-ups) first and the rest from the last
    (later notebooks measure more)."""
    try:
        last = {k: v["seconds"] for k, v in
                json.loads((out / "results.json").read_text())["notebooks"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        last = {}
    if all(s.stem in last for s in srcs):
        return sorted(srcs, key=lambda s: -last[s.stem])
    return sorted(srcs, key=lambda s: ("engine" not in s.stem, -srcs.index(s)))


def run_parallel(srcs, out: Path, params: dict, jobs: int, verbose: bool, done) -> list[dict]:
    """`render` every notebook in `jobs` worker processes (papermill changes the process's working
    directory, so notebooks cannot share one), longest first (`schedule`). Rows come back in
    notebook order; `done(n, row)` is called as each finishes."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    order = schedule(srcs, out)
    n_of = {s: n for n, s in enumerate(srcs, 1)}
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(render, s, out, params, False, verbose): s for s in order}
        rows = {futures[f]: done(n_of[futures[f]], f.result()) for f in as_completed(futures)}
    return [rows[s] for s in srcs]


def build_reports(out_dir="reports", params: dict | None = None, notebooks=None,
                  progress: bool = True, verbose: bool = False, jobs: int | None = None) -> Path:
    """Execute the notebooks, write `<stem>.ipynb` (executed) and `<stem>.html` per notebook plus
    `index.html` and `results.json` into `out_dir`. Returns the index path. Raises ReportError
    (after writing everything) if any notebook failed. `jobs` notebooks run at once (default
    `default_jobs()`: two on two cores or more, one thread per kernel); each has its own kernel, so
    results do not depend on it."""
    from eagle_nb.report.params import check_out_dir, check_params
    check_out_dir(out_dir, NOTEBOOK_DIR)
    srcs = list_notebooks(notebooks)
    params = resolve_params(params)
    check_params(params, srcs)          # unknown names and bad values, before anything executes
    out = Path(out_dir).resolve()       # papermill changes the working directory while it runs
    out.mkdir(parents=True, exist_ok=True)
    jobs = max(1, min(jobs or default_jobs(), len(srcs)))
    t_all = time.perf_counter()

    def done(n, row):
        if progress:
            print(f"[{n}/{len(srcs)}] {row['name']}: {'ok' if row['error'] is None else row['error']} "
                  f"in {row['seconds']:.1f} s", flush=True)
        return row

    with kernel_env(threads=1 if jobs > 1 else None):
        if jobs == 1:
            rows = []
            for n, src in enumerate(srcs, 1):
                if progress:
                    print(f"[{n}/{len(srcs)}] executing {src.name}", flush=True)
                rows.append(done(n, render(src, out, params, progress, verbose)))
        else:
            rows = run_parallel(srcs, out, params, jobs, verbose, done)
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
