"""Server lifecycle without vLLM: a stand-in process group (tests/engines/fake_engine.py) is
started, reused, stopped, killed when the body raises, escalated to SIGKILL when it ignores SIGTERM,
and a taken port is refused before launch or reported when the server dies on it. The same code
paths run against the real vLLM in test_engine.py."""
from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import pytest

from eagle_nb.engines import EngineError, VllmServer, serve
from eagle_nb.engines.server import group_members, port_in_use
from eagle_nb.io.paths import REPO_ROOT

FAKE = [sys.executable, str(Path(__file__).with_name("fake_engine.py")), "--port", "{port}"]


def alive(pids):
    return [p for p in pids if p in set(group_members(pids[0]))] if pids else []


def test_started_reused_stopped():
    srv = serve("t", "d", 4, command=FAKE)
    try:
        pids = srv.group_pids()
        assert srv.running() and len(pids) == 2             # server + its child
        assert serve("t", "d", 4, command=FAKE) is srv and srv.reused == 1
        other = serve("t", "d", 5, command=FAKE)             # another configuration: its own server
        assert other is not srv and other.port != srv.port
        other.stop()
    finally:
        srv.stop()
    assert not srv.running() and alive(pids) == [] and not port_in_use(srv.port)
    assert serve("t", "d", 4, command=FAKE) is not srv      # stopped servers are not reused
    serve("t", "d", 4, command=FAKE).stop()


def test_killed_when_the_body_raises():
    with pytest.raises(ZeroDivisionError):
        with VllmServer("t", "d", command=FAKE) as srv:
            pids = srv.group_pids()
            1 / 0
    assert len(pids) == 2 and alive(pids) == []


def test_sigterm_ignored_escalates_to_sigkill():
    srv = VllmServer("t", "d", command=FAKE + ["--ignore-term"]).start()
    pids = srv.group_pids()
    t0 = time.perf_counter()
    srv.stop(grace_s=1.0)
    assert alive(pids) == [] and time.perf_counter() - t0 < 8


def test_port_conflict():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(EngineError, match=f"port {port} .* already in use"):
            VllmServer("t", "d", port=port, command=FAKE).start()
    srv = VllmServer("t", "d", command=FAKE + ["--exit-with-port-error"])
    with pytest.raises(EngineError, match="port taken by another process"):
        srv.start()
    assert not srv.running()


def test_missing_engine_environment_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_VENV", str(tmp_path / "nowhere"))
    monkeypatch.delenv("EAGLE_NB_ENGINE_PYTHON", raising=False)
    with pytest.raises(EngineError, match="nowhere/bin/python does not exist; run `make engine`"):
        VllmServer("t", "d").start()


def test_server_dies_with_a_killed_parent(tmp_path):
    """A kit process killed with SIGKILL (no atexit) still takes its server down."""
    import os
    import signal
    import subprocess
    code = ("import sys, time; sys.path.insert(0, %r)\n"
            "from eagle_nb.engines import VllmServer\n"
            "s = VllmServer('t', 'd', command=%r).start()\n"
            "print(s.proc.pid, flush=True); time.sleep(600)\n") % (str(REPO_ROOT), FAKE)
    kit = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    leader = int(kit.stdout.readline())
    os.kill(kit.pid, signal.SIGKILL)
    kit.wait()
    deadline = time.monotonic() + 10
    while group_members(leader) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = group_members(leader)
    for p in left:                                    # clean up before failing
        os.kill(p, signal.SIGKILL)
    assert left == []
