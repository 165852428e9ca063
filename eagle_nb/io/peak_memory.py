"""Peak resident memory: the one meter of the tests and benchmarks.

- `peak_rss_mib(["-m", "eagle_nb", "inspect", D])` (or `["-c", CODE, ARGS...]`): the peak of
  `python ARGS...` run in a fresh process, read by that process itself at exit from the kernel's
  high-water mark of its own address space (`VmHWM`, /proc/self/status). A fresh exec starts a
  fresh address space, so nothing of the (large) parent is counted; `ru_maxrss` would be floored
  at the parent's size, since Linux carries the forking process's mark over exec.
- `PeakRSS()`: a block's peak above this process's resident memory at its start (Linux:
  /proc/self/clear_refs resets the high-water mark).

Linux reports VmHWM; elsewhere the child falls back to `ru_maxrss` (floored as said). Knows no model.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

STATUS = Path("/proc/self/status")

# Run `python MODE WHAT ARGS...` as `python` would, then write this process's peak (KiB) to OUT.
PROBE = """\
import atexit, resource, runpy, sys
out, mode, what, *rest = sys.argv[1:]
def peak_kib():
    try:
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) for x in f if x.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def write():
    with open(out, "w") as f:
        f.write(str(peak_kib()))
atexit.register(write)
sys.argv = [what if mode == "-m" else "-c", *rest]
if mode == "-m":
    runpy.run_module(what, run_name="__main__", alter_sys=True)
else:
    exec(compile(what, "<string>", "exec"), {"__name__": "__main__"})
"""


def peak_rss_mib(args: list[str], *, env: dict | None = None, cwd=None, timeout: float | None = None) -> float:
    """Peak resident memory (MiB) of `python *args` (`-m MODULE ...` or `-c CODE ...`) in a fresh
    process. Raises RuntimeError with the end of its output when it exits non-zero."""
    if not args or args[0] not in ("-m", "-c") or len(args) < 2:
        raise ValueError(f"expected ['-m', MODULE, ...] or ['-c', CODE, ...], got {args!r}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "peak_kib"
        p = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], capture_output=True,
                           text=True, env=env, cwd=cwd, timeout=timeout)
        if p.returncode:
            raise RuntimeError(f"python {' '.join(args)[:200]} exited {p.returncode}: "
                               f"{(p.stdout + p.stderr)[-2000:]}")
        return int(out.read_text()) / 1024


def _status_kib(field: str) -> int:
    for line in STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


class PeakRSS:
    """`with PeakRSS() as m: ...` then `m.mib`: this process's peak resident memory inside the
    block, above its resident memory when the block began (Linux only)."""

    def __enter__(self) -> "PeakRSS":
        Path("/proc/self/clear_refs").write_text("5")       # resets VmHWM to the current RSS
        self.base_kib, self.mib = _status_kib("VmRSS"), None
        return self

    def __exit__(self, *exc) -> None:
        self.mib = (_status_kib("VmHWM") - self.base_kib) / 1024

