"""Adding an engine is one registry entry: a fake engine (tests/engines/fake_engine.py as its
server) registered for the duration of a test is picked up by every command without another edit:
`engine log` reads its lines, `engine compare --engine fake` launches it, scrapes its counters and
writes its broken drafter, `record --engine fake` records on it in its entry's dtype, and the
doctor ranks what its log and its /metrics page report. No engine environment is needed."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from eagle_nb.cli.main import main
from eagle_nb.engines import registry
from eagle_nb.engines.entry import NUM, Engine, fields
from eagle_nb.engines.server import Server
from eagle_nb.engines.vllm import complete
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET
from helpers import code_prompts

SERVER = [sys.executable, str(Path(__file__).with_name("fake_engine.py")), "--port", "{port}"]
LINE = "FAKE spec: accepted 3 of 8 drafted, tau 2.50, per-pos 1.00,0.50,0.00,0.00"
CALLS: dict = {}


def parse_line(line: str) -> dict | None:
    f = fields(line, {"accepted_tokens": rf"accepted {NUM} of", "drafted_tokens": rf"of {NUM} drafted",
                      "accept_length": rf"tau {NUM}"})
    m = re.search(r"per-pos ([\d.,]+)$", line.strip())
    if len(f) < 3 or not m:
        return None
    return {**f, "per_position": [float(x) for x in m.group(1).split(",")]}


def observe(rows, summary, text) -> dict:
    per = [sum(col) / len(col) for col in zip(*rows.per_position)]
    return {"tau": 1 + sum(per), "depth": len(per), "per_position": per}


def server(target, drafter, depth, *, dtype, startup_timeout, **kw):
    CALLS["server"] = (str(drafter), dtype)
    srv = Server(target, drafter, depth, command=SERVER + ["--depth", str(depth)], startup_timeout=60)
    srv.engine = "fake"
    return srv


def record(target, prompts_ids, out_dir, layer_ids, *, dtype, **kw):
    """The fake engine 'records' with the kit's own target (a stand-in for its hidden-states route)."""
    import torch

    from eagle_nb.recordings.recording import record as record_here
    from eagle_nb.model.targets import load_target
    CALLS["record"] = dtype
    model, _ = load_target(target, device="cpu", dtype=dtype)
    ids = [torch.tensor([list(p)]) for p in prompts_ids]
    return record_here(model, ids, out_dir, layer_ids, max_new_tokens=kw["max_new_tokens"],
                       lookahead=kw["lookahead"], eos_token_id=kw.get("eos_token_id"), progress=False)


def write_broken(src, dst, fault, target=None):
    from eagle_nb.engines.broken import write_broken_drafter
    CALLS["broken"] = fault
    return write_broken_drafter(src, dst, fault)


FAKE = Engine("fake", "FakeEngine", log_mark="FAKE spec:", parse_line=parse_line, observe=observe,
              counter_prefix="fake:spec_decode_", generated_counter="fake:generation_tokens_total",
              server=server, unavailable=lambda: None, complete=complete, dtype="float32",
              record=record, write_broken=write_broken, broken_faults=lambda: ("layer-ids+1",))


def run(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_a_fake_engine_is_one_entry_every_command_reads(tmp_path, capsys):
    """One `registered(FAKE)`: engine log, engine compare (with a broken drafter), record --engine
    and the doctor (log and /metrics) all take it; after the block it is gone."""
    log = tmp_path / "fake.log"
    log.write_text("starting\n" + LINE + "\n" + LINE + "\nFAKE spec: accepted 3 of\n")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in code_prompts(2)))
    with registry.registered(FAKE):
        code, out, _ = run(capsys, "engine", "compare", "--help")
        assert "fake" in out
        code, out, _ = run(capsys, "engine", "log", str(log), "--json")   # the one log reader
        j = json.loads(out)
        assert code == 0 and j["summary"]["counts"]["fake"] == 2 and j["summary"]["counts"]["malformed"] == 1
        assert {r["engine"] for r in j["rows"]} == {"fake"}
        code, out, err = run(capsys, "engine", "compare", "--engine", "fake", "--target", str(CODE_TARGET),
                             "--drafter", str(CODE_DRAFTER_SPECULATORS), "--prompts", str(prompts),
                             "--max-new-tokens", "8", "--broken", "layer-ids+1", "--json")
        j = json.loads(out)
        assert j["setting"]["engine_kind"] == "fake" and j["engine_counters"]["engine"] == "fake", err
        assert j["engine"]["accept_length"] == pytest.approx(2.5) and j["engine_log"]["counts"]["fake"] == 2
        assert CALLS["broken"] == "layer-ids+1" and j["setting"]["reference_ablations"] == ["layer-ids+1"]
        assert CALLS["server"] == (j["setting"]["engine_drafter"], "float32")
        code, out, err = run(capsys, "record", "--engine", "fake", "--target", str(CODE_TARGET),
                             "--prompts", str(prompts), "--out", str(tmp_path / "rec"),
                             "--max-new-tokens", "8", "--lookahead", "4", "--layers-from",
                             str(CODE_DRAFTER_SPECULATORS))
        assert code == 0 and "on FakeEngine (float32)" in out and CALLS["record"] == "float32", err
        index = json.loads((tmp_path / "rec" / "recording.json").read_text())
        assert index["target_dtype"] == "float32" and len(index["records"]) == 2
        code, out, err = run(capsys, "doctor", "--drafter", str(CODE_DRAFTER_SPECULATORS), "--target",
                             str(CODE_TARGET), "--observed", str(log), "--static-only", "--json")
        j = json.loads(out)
        assert code == 1 and j["observation"]["engine"] == "fake" and j["observation"]["source"] == "fake log"
        assert j["observation"]["tau"] == pytest.approx(2.5) and j["observation"]["depth"] == 4
        srv = server(CODE_TARGET, CODE_DRAFTER_SPECULATORS, 4, dtype="float32", startup_timeout=60).start()
        try:
            complete(srv.url, [[1, 2, 3]], 4, 0.0, None)            # the server counts one prompt
            code, out, err = run(capsys, "doctor", "--drafter", str(CODE_DRAFTER_SPECULATORS), "--target",
                                 str(CODE_TARGET), "--observed-url", srv.url, "--static-only", "--json")
        finally:
            srv.stop()
        j = json.loads(out)
        assert code == 1 and j["observation"]["engine"] == "fake", err
        assert j["observation"]["tau"] == pytest.approx(2.5) and j["observation"]["per_position"][:2] == [1.0, 0.5]
    assert "fake" not in registry.names()
    code, _, err = run(capsys, "engine", "log", str(log))
    assert code == 1                          # no engine of the registry marks these lines now
