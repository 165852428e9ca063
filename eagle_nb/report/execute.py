"""Executing the investigation notebooks headless: which notebooks, their parameters, one run each.

Knows nothing about HTML; build.py calls it and html.py renders the result.
"""

from __future__ import annotations

import ast
import os
import re
import time
from pathlib import Path

from eagle_nb.io.paths import NOTEBOOKS_DIR as NOTEBOOK_DIR
from eagle_nb.io.paths import REPO_ROOT
from eagle_nb.report.index_page import write_index  # noqa: F401 - phase 4 lives there


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


def notebook_params(src: Path, params: dict) -> dict:
    """The parameters one notebook gets: `precompute_report=True` (the report-only panels) when
    the notebook declares it and the caller did not set it."""
    import nbformat
    nb = nbformat.read(src, as_version=4)
    declared = any("parameters" in c.metadata.get("tags", []) and
                   re.search(r"^precompute_report\s*=", c.source, re.M) for c in nb.cells)
    return {"precompute_report": True, **params} if declared else dict(params)
