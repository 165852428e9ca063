"""Executing the investigation notebooks headless: which notebooks, their parameters, one run each.

Knows nothing about HTML; build.py calls it and html.py renders the result.
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import time
from pathlib import Path

from eagle_nb.io.paths import NOTEBOOKS_DIR as NOTEBOOK_DIR
from eagle_nb.io.paths import REPO_ROOT


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


@contextlib.contextmanager
def kernel_env(threads: int | None = None):
    """The environment kernels start in, for the duration of the block: the checkout on PYTHONPATH
    (the notebooks import eagle_nb from it) and, with `threads`, OMP_NUM_THREADS and the engines'
    thread count (unless the user set them): notebooks run side by side get one thread each (the
    shipped models are overhead-bound, and two kernels with two threads each on two cores slow each
    other down). Restored afterwards."""
    from eagle_nb.engines.llama_cpp import THREADS_ENV
    keys = ("PYTHONPATH", "OMP_NUM_THREADS", THREADS_ENV)
    saved = {k: os.environ.get(k) for k in keys}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), saved["PYTHONPATH"]) if p)
    for k in keys[1:]:
        if threads is not None and saved[k] is None:
            os.environ[k] = str(threads)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def execute(src: Path, dst: Path, params: dict, progress: bool = True, timeout: int = 900,
            verbose: bool = False):
    """Run one notebook with papermill (inside `kernel_env`). Returns (seconds, error or None).
    Thread-safe: several notebooks may run at once, each in its own kernel."""
    import papermill as pm
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
    return time.perf_counter() - t0, error


def default_jobs() -> int:
    """Notebooks run at once: two where there are two cores or more (each kernel then gets one
    thread), else one."""
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def notebook_params(src: Path, params: dict) -> dict:
    """The parameters one notebook gets: `precompute_report=True` (the report-only panels) when
    the notebook declares it and the caller did not set it."""
    import nbformat
    nb = nbformat.read(src, as_version=4)
    declared = any("parameters" in c.metadata.get("tags", []) and
                   re.search(r"^precompute_report\s*=", c.source, re.M) for c in nb.cells)
    return {"precompute_report": True, **params} if declared else dict(params)
