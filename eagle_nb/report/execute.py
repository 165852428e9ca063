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
# Report tables are small and shown whole: pandas would cut a cell past 50 characters and elide
# rows past 60 and columns past 20 ("..."), and a static page cannot widen them. Set in the kernel
# before the first cell, so it holds for every table whatever a notebook's setup cell sets.
WHOLE_TABLES = {"display.max_colwidth": None, "display.max_columns": None, "display.max_rows": 500}
REPORT_KERNEL = ["--IPKernelApp.exec_lines=__import__('pandas').set_option(" +
                 ", ".join(f"{k!r}, {v!r}" for k, v in WHOLE_TABLES.items()) + ")"]


def _kernel_manager_class():
    """jupyter_client's kernel manager, minus the interrupt it sends before every shutdown.

    papermill's last request is a `kernel_info_request`, and it shuts the kernel down as soon as
    the reply arrives, not when the kernel leaves that request's handler. `shutdown_kernel`
    interrupts first (SIGINT to the kernel's process group); while a handler runs, ipykernel has
    Python's default SIGINT handler installed, so on a loaded machine the interrupt landed inside
    the handler and the kernel logged `ERROR | KeyboardInterrupt caught in kernel.` (issue 28).
    The notebook has finished (or failed, and its error is in the notebook) by then, so there is
    nothing to interrupt: the shutdown request goes out alone, and a kernel that does not stop is
    still killed by jupyter_client after its `shutdown_wait_time`. Cell timeouts are unaffected
    (nbclient raises them itself). A class built on first use, so importing this module does not
    import jupyter_client."""
    global _ShutdownWithoutInterrupt
    if _ShutdownWithoutInterrupt is None:
        from jupyter_client.manager import AsyncKernelManager

        class ShutdownWithoutInterrupt(AsyncKernelManager):
            async def _async_interrupt_kernel(self):
                if self.shutting_down:
                    return
                await super()._async_interrupt_kernel()

        _ShutdownWithoutInterrupt = ShutdownWithoutInterrupt
    return _ShutdownWithoutInterrupt


_ShutdownWithoutInterrupt = None


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
    """Run one notebook with papermill (inside `kernel_env`) in a kernel that shows tables whole
    (`WHOLE_TABLES`) and is shut down without an interrupt (`_kernel_manager_class`). Returns
    (seconds, error or None). Thread-safe: several notebooks may run at once, each in its own
    kernel."""
    import papermill as pm
    t0 = time.perf_counter()
    try:
        pm.execute_notebook(str(src), str(dst), parameters=params, cwd=str(src.parent),
                            progress_bar=progress, execution_timeout=timeout,
                            extra_arguments=REPORT_KERNEL + ([] if verbose else QUIET_KERNEL),
                            kernel_manager_class=_kernel_manager_class())
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
