"""The engine entries' facts, read the same way by every command (no engine environment needed): a
llama-server log that `eagle-nb engine log` reads is an observation the doctor ranks; llama-server's
counters are llama.cpp's, not vLLM's, and the serving notes follow the engine that reported; the
engine's dtype is one default in its entry (float32, the reference loop's), used by `record
--engine` and the servers, and written into the recording."""
from __future__ import annotations

import dataclasses
import http.server
import json
import sys
import threading

import pytest

import eagle_nb
from eagle_nb.cli.main import main
from eagle_nb.engines import observation, registry
from eagle_nb.engines.vllm import VllmServer, hidden_states_server
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET

# two llama-server `print_timing` lines (tools/server/server-context.cpp): 100 verify steps each
LLAMA_LOG = """main: server is listening on http://127.0.0.1:8080
slot print_timing: id  0 | task 0 | draft acceptance = 0.01000 (    4 accepted /   400 generated), mean len =  1.04
slot print_timing: id  0 | task 7 | draft acceptance = 0.01250 (    5 accepted /   400 generated), mean len =  1.05
"""
COUNTERS = ("{p}spec_decode_num_drafts_total 100\n{p}spec_decode_num_draft_tokens_total 400\n"
            "{p}spec_decode_num_accepted_tokens_total 5\n"
            + "".join(f'{{p}}spec_decode_num_accepted_tokens_per_pos_total{{{{position="{i}"}}}} {v}\n'
                      for i, v in enumerate([4, 1, 0, 0])))


def run(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_doctor_accepts_the_llama_server_log_engine_log_reads(tmp_path, capsys):
    """Two llama-server request lines (mean len 1.04 and 1.05): `engine log` shows both as
    llama.cpp rows, and `doctor --observed` ranks them (exit 1, not 2): tau pooled over the
    verify steps, 1 + 9 / 200, and no depth (the request lines do not state it)."""
    log = tmp_path / "llama-server.log"
    log.write_text(LLAMA_LOG)
    code, out, _ = run(capsys, "engine", "log", str(log), "--json")
    rows = json.loads(out)["rows"]
    assert code == 0 and [r["engine"] for r in rows] == ["llama.cpp"] * 2
    assert [r["accept_length"] for r in rows] == [1.04, 1.05]
    code, out, err = run(capsys, "doctor", "--drafter", str(CODE_DRAFTER_SPECULATORS), "--target",
                         str(CODE_TARGET), "--observed", str(log), "--static-only", "--json")
    j = json.loads(out)
    o = j["observation"]
    assert code == 1 and o["engine"] == "llama.cpp" and o["source"] == "llama.cpp log", err
    assert o["tau"] == pytest.approx(1.045) and o["lines"] == 2 and o["depth"] is None
    assert "do not state the draft depth" in o["depth_note"] and j["inputs"]["depth"] == 4
    assert j["verdict"]["cause"] != "healthy"


def test_metrics_are_labelled_by_the_engine_whose_prefix_they_carry():
    """The same counters under `llamacpp:` and `vllm:` are the one engine's or the other's."""
    lc = observation.from_metrics(COUNTERS.format(p="llamacpp:"))
    vl = observation.from_metrics(COUNTERS.format(p="vllm:"))
    assert (lc.engine, vl.engine) == ("llama.cpp", "vllm")
    assert lc.tau == vl.tau == pytest.approx(1.05) and lc.per_position == [0.04, 0.01, 0, 0]


def _serve(page: str):
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(page.encode())

        def log_message(self, *a):
            pass
    srv = http.server.HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_serving_notes_follow_the_engine_that_reported(tmp_path):
    """The seed case's wrapper target observed through /metrics: from llama-server's counters the
    serving-side check keeps every engine's notes (none is llama.cpp's), from vLLM's only vLLM's."""
    case = eagle_nb.build_seed_case("kimi-k2.5", tmp_path)
    checks = {}
    for prefix, engine in (("llamacpp:", "llama.cpp"), ("vllm:", "vllm")):
        srv = _serve(COUNTERS.format(p=prefix))
        try:
            d = eagle_nb.diagnose(case.drafter, case.target, observed_url=f"http://127.0.0.1:{srv.server_port}",
                                  depth=4, progress=False)
        finally:
            srv.shutdown()
        assert d.observation["engine"] == engine and d.verdict.basis == "signature"
        checks[engine] = next(h for h in d.hypotheses if h.fault == "wrapper-capture").serving_check
    assert "SGLang `kimi_k25.py`" in checks["llama.cpp"] and "vLLM `kimi_k25.py`" in checks["llama.cpp"]
    assert "SGLang `kimi_k25.py`" not in checks["vllm"] and "vLLM `kimi_k25.py`" in checks["vllm"]


def test_one_engine_dtype_in_the_entry(tmp_path, capsys, monkeypatch):
    """vLLM's entry says float32; its servers and `record --engine vllm` without --dtype use it,
    and --dtype still overrides it."""
    e = registry.entry("vllm")
    assert e.dtype == "float32"
    cmd = VllmServer("t", "d", python=sys.executable).build_command(8000)
    assert cmd[cmd.index("--dtype") + 1] == "float32"
    assert hidden_states_server(CODE_TARGET, [2, 4, 5], tmp_path, python=sys.executable).dtype == "float32"
    seen = []
    monkeypatch.setattr(registry, "ENGINES", tuple(
        dataclasses.replace(x, record=lambda *a, dtype, **k: seen.append(dtype) or tmp_path) if x is e else x
        for x in registry.ENGINES))
    for extra, want in (([], "float32"), (["--dtype", "bfloat16"], "bfloat16")):
        code, out, _ = run(capsys, "record", "--engine", "vllm", "--target", str(CODE_TARGET), "--prompt",
                           "def f(x):", "--out", str(tmp_path / "r"), *extra)
        assert code == 0 and seen[-1] == want and f"({want})" in out
