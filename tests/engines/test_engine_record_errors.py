"""Recording on an engine, without one: the vLLM facts the route relies on as pure functions, the
final norm read lazily from the checkpoint, and every way a server can fail the route answered
with an error naming the version, file or flag and the fix (a stand-in server over HTTP)."""
from __future__ import annotations

import http.server
import json
import threading

import pytest
import torch
from safetensors.torch import save_file

from eagle_nb.cli.main import main as cli_main
from eagle_nb.engines import hidden_states as hs
from eagle_nb.engines.recorder import final_norm, record_on_engine, rms_norm
from eagle_nb.engines.server import EngineError
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET
from eagle_nb.io.target_parts import TargetParts
from eagle_nb.recordings.recording_writer import RecordingWriter


def test_version_gates_name_the_version_and_the_fix():
    hs.check_engine_version("0.32.0", tensor_parallel_size=8)
    for v, tp, says in (("0.16.2", 1, "has no `extract_hidden_states`"), ("0.23.1", 1, "needs 0.24"),
                        ("0.30.0", 8, "tensor parallelism")):
        with pytest.raises(EngineError, match=says) as e:
            hs.check_engine_version(v, tp)
        assert v in str(e.value) and "pip install" in str(e.value)
    assert hs.version_tuple("0.32.0+cpu") == (0, 32, 0)


def test_engine_order_is_sorted_and_columns_follow_the_request():
    ids = hs.engine_layer_ids([5, 2, 4], [8])
    assert ids == [2, 4, 5, 8] and hs.columns(ids, [5, 2]) == [2, 0]
    with pytest.raises(EngineError, match=r"\[3\] are not among them"):
        hs.columns(ids, [3, 4])
    spec = hs.speculative_config(ids)
    assert spec["draft_model_config"]["hf_config"]["eagle_aux_hidden_state_layer_ids"] == ids
    assert spec["num_speculative_tokens"] == 1
    kv = hs.kv_transfer_config("/s")
    assert kv["kv_connector_module_path"] == hs.CONNECTOR_MODULE
    assert (hs.PLUGIN_DIR / f"{hs.CONNECTOR_MODULE}.py").is_file()
    assert "kv_connector_module_path" not in hs.kv_transfer_config("/s", stock=True)
    body = hs.completion_body("m", [1, 2], 9)
    assert body["kv_transfer_params"] == {"include_output_tokens": True} and body["ignore_eos"]


def test_the_connector_module_imports_nothing_of_the_kit():
    text = (hs.PLUGIN_DIR / f"{hs.CONNECTOR_MODULE}.py").read_text()
    assert "eagle_nb" not in [w.strip(".") for line in text.splitlines()
                              if line.startswith(("import ", "from ")) for w in line.split()]


def test_final_norm_is_the_targets_own(tmp_path):
    from eagle_nb.model.targets import load_target
    model, _ = load_target(CODE_TARGET, device="cpu")
    w, eps = final_norm(TargetParts(CODE_TARGET))
    x = torch.randn(5, 192)
    torch.testing.assert_close(rms_norm(x, w, eps), model.model.norm(x), atol=1e-6, rtol=1e-6)


def test_read_states_names_a_missing_or_foreign_file(tmp_path):
    with pytest.raises(EngineError, match="not on this machine"):
        hs.read_states(str(tmp_path / "x.safetensors"), timeout=0.1)
    save_file({"other": torch.zeros(1)}, str(tmp_path / "y.safetensors"))
    with pytest.raises(EngineError, match="no tensor 'hidden_states'"):
        hs.read_states(str(tmp_path / "y.safetensors"), timeout=0.1)


def test_writer_refuses_unsorted_ids(tmp_path):
    with pytest.raises(ValueError, match="ascending"):
        RecordingWriter(tmp_path, [5, 2], num_layers=8, max_new_tokens=4, lookahead=1)


class _Fake(http.server.BaseHTTPRequestHandler):
    version, answer = "0.32.0", {}

    def _send(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._send({"version": self.version} if self.path == "/version" else {"data": [{"id": "m"}]})

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send(self.answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", _Fake
    srv.shutdown()


@pytest.mark.parametrize("version, answer, says", [
    ("0.16.0", {}, "vLLM 0.16.0 has no `extract_hidden_states`"),
    ("0.32.0", {"choices": [{"token_ids": [1, 2, 3]}]}, "without kv_transfer_params.hidden_states_path"),
    ("0.32.0", {"choices": [{"token_ids": [1, 2, 3]}],
                "kv_transfer_params": {"hidden_states_path": "/nowhere/r.safetensors"}},
     "not on this machine"),
])
def test_a_server_that_cannot_record_is_named(fake, tmp_path, version, answer, says, monkeypatch):
    url, handler = fake
    monkeypatch.setattr(handler, "version", version)
    monkeypatch.setattr(handler, "answer", answer)
    with pytest.raises(EngineError, match=says):
        record_on_engine(CODE_TARGET, [[5, 6]], tmp_path / "r", [2, 4, 5], max_new_tokens=2,
                         lookahead=1, url=url, timeout=0.2, progress=False)
    assert not (tmp_path / "r" / "recording.json").exists()


def test_cli_refuses_url_without_engine_and_reports_engine_errors(fake, tmp_path, capsys, monkeypatch):
    url, handler = fake
    with pytest.raises(SystemExit) as e:
        cli_main(["record", "--prompt", "x", "--out", str(tmp_path / "a"), "--url", url])
    assert e.value.code == 2 and "--url needs --engine vllm" in capsys.readouterr().err
    monkeypatch.setattr(handler, "version", "0.20.0")
    with pytest.raises(SystemExit) as e:
        cli_main(["record", "--engine", "vllm", "--url", url, "--prompt", "def f(x):", "--out",
                  str(tmp_path / "b"), "--layers-from", str(CODE_DRAFTER_SPECULATORS)])
    assert e.value.code == 2 and "vLLM 0.20.0 stores the prompt's states only" in capsys.readouterr().err
