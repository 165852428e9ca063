"""An engine server as a child process group the kit owns (`Server`), and the HTTP calls the kit
makes to engines.

The kit never imports an engine: each runs as its own program (vLLM from the engine environment,
`make engine`; llama-server built there too; vllm.py and llama_cpp.py build their command lines)
and is reached over HTTP on 127.0.0.1. The server runs in its own process group, so stopping it
takes the engine's children with it; it is stopped on every exit path (context manager, explicit
`stop()`, interpreter exit via atexit, and SIGTERM from the kernel when the kit process dies
without running atexit). Knows processes and ports; knows nothing about any engine's flags.
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from eagle_nb.io.paths import REPO_ROOT

DEFAULT_ENGINE_VENV = REPO_ROOT / ".venv-engine"
HOST = "127.0.0.1"
RUNNING: dict[tuple, "Server"] = {}      # shared servers by configuration (vllm.serve)


class EngineError(RuntimeError):
    """The engine could not be found, started or reached (the message says which and why)."""


def engine_python(python=None) -> Path:
    """The interpreter of the engine environment: `python`, else $EAGLE_NB_ENGINE_PYTHON, else
    $ENGINE_VENV/bin/python, else <repo>/.venv-engine/bin/python. Raises EngineError if absent."""
    cand = python or os.environ.get("EAGLE_NB_ENGINE_PYTHON") or \
        Path(os.environ.get("ENGINE_VENV") or DEFAULT_ENGINE_VENV) / "bin" / "python"
    cand = Path(cand)
    if not cand.exists():
        raise EngineError(f"no engine environment: {cand} does not exist; run `make engine` (vLLM CPU "
                          "build into .venv-engine) or set ENGINE_VENV to an environment with vLLM")
    return cand


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the kit's process dies, even by SIGKILL, where atexit
    cannot run (Linux prctl PR_SET_PDEATHSIG; elsewhere a no-op). vLLM then shuts down its own
    children. NOTE: the signal follows the *thread* that started the server."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def port_in_use(port: int) -> bool:
    """True when something listens on (or holds) the port; connections left in TIME_WAIT do not
    count (servers bind with SO_REUSEADDR, as uvicorn does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def http_get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def http_post_json(url: str, body: dict, timeout: float = 600.0) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        raise EngineError(f"POST {url} failed with HTTP {e.code}: {e.read().decode()[:500]}") from None


class Server:
    """One engine server process group the kit owns. Use as a context manager, or `vllm.serve()` to
    share one per configuration within a process. `command` is its command line (`{port}` in it is
    filled in); a subclass builds its own in `build_command` when none is given (vllm.py,
    llama_cpp.py). `engine` names its registry entry."""

    engine: str | None = None
    log_prefix = "eagle_nb_engine_"

    def __init__(self, target, drafter, depth: int = 4, *, port: int | None = None, env=None,
                 startup_timeout: float = 900.0, command: list[str] | None = None, log_dir=None):
        self.target, self.drafter, self.depth = str(target), str(drafter), int(depth)
        self.requested_port, self.port = port, None
        self.env, self.startup_timeout = dict(env or {}), startup_timeout
        self.command = command
        self.log_path = Path(tempfile.mkstemp(prefix=self.log_prefix, suffix=".log", dir=log_dir)[1])
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None
        self.reused = 0                                # times `serve()` handed this server out again

    def build_command(self, port: int) -> list[str]:
        raise EngineError(f"{type(self).__name__}: no command line given")

    def engine_env(self) -> dict:
        """Environment variables the engine needs beyond the kit's (a subclass adds its own)."""
        return {}

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "Server":
        if self.running():
            return self
        if self.requested_port is not None and port_in_use(self.requested_port):
            raise EngineError(f"port {self.requested_port} on {HOST} is already in use; pass port=None "
                              "to pick a free one, or stop whatever listens there")
        self.port = self.requested_port or free_port()
        if self.command is not None:
            cmd = [c.replace("{port}", str(self.port)) for c in self.command]
        else:
            cmd = self.build_command(self.port)
        # The kit's PYTHONPATH must not leak into the engine's env; `env` may set one of its own
        # (the folder of a plug-in module the engine imports, e.g. the hidden-states connector).
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
               "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **self.engine_env(), **self.env}
        t0 = time.perf_counter()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     cwd=str(REPO_ROOT), start_new_session=True,
                                     preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        log.close()
        atexit.register(self.stop)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.perf_counter() - t0
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                tail = self.log_text()[-3000:]
                hint = " (port taken by another process?)" if "address already in use" in tail.lower() else ""
                raise EngineError(f"the engine exited with code {self.proc.returncode} before "
                                  f"answering /health{hint}; log {self.log_path}:\n{tail}")
            try:
                http_get(self.url + "/health", timeout=2)
                return
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        raise EngineError(f"the engine did not answer {self.url}/health within {self.startup_timeout:.0f}s; "
                          f"log {self.log_path}")

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the whole process group, SIGKILL what is left after `grace_s`; returns when no
        process of the group is left. Idempotent."""
        p = self.proc
        if p is None:
            return
        pgid = p.pid                                   # start_new_session: the leader's pid is the pgid
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                p.poll()                               # reap the leader so it is not a zombie
                if not _group_alive(pgid):
                    break
                time.sleep(0.1)
            if not _group_alive(pgid):
                break
        p.poll()
        atexit.unregister(self.stop)
        for key, srv in list(RUNNING.items()):
            if srv is self:
                del RUNNING[key]

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def group_pids(self) -> list[int]:
        """Live processes in the server's process group (the server and its engine children)."""
        if self.proc is None:
            return []
        return group_members(self.proc.pid)


def group_members(pgid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":      # state, ppid, pgrp
            out.append(int(d.name))
    return out


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def stop_all() -> None:
    """Stop every server `serve()` started in this process."""
    for srv in list(RUNNING.values()):
        srv.stop()
