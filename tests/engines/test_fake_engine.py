"""Adding an engine is one registry entry: a fake engine (tests/engines/fake_engine.py as its
server) registered for the duration of a test is picked up by every command without another edit:
`engine log` reads its lines, `engine compare --engine fake` launches it, scrapes its counters and
writes its broken drafter, `record --engine fake` records on it in its entry's dtype, the doctor
ranks what its log and its /metrics page report, `profile --to fake` prints its knobs, `tune` its
flags for the best draft length, and the doctor's aux-ids check lists the layers it captures. No
engine environment is needed."""
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
from eagle_nb.model.architectures import serving_notes
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


def knobs(p, k=None, drafter=None) -> dict:
    """Its synthetic acceptance: the mean accepted drafts per step, at its depth flag."""
    from eagle_nb.profiles import knobs as K
    k = K.depth(p, k)
    return {"env": {"FAKE_ACCEPTED": f"{K.accepted_drafts(p, k):.3f}"}, "flags": draft_flags(k),
            "drafter": drafter}


def render_knobs(s: dict) -> str:
    return (f"# FakeEngine: forced accepted drafts\nFAKE_ACCEPTED={s['env']['FAKE_ACCEPTED']} "
            f"fake-serve TARGET --fake-depth {s['flags']['--fake-depth']}")


def draft_flags(k: int) -> dict | str:
    return {"--fake-depth": k} if k else "no --fake-depth (speculation does not pay)"


def captures(raw_cfg: dict, default: list[int]) -> dict:
    return {"FakeEngine (reads the default)": default}


FAKE = Engine("fake", "FakeEngine", log_mark="FAKE spec:", parse_line=parse_line, observe=observe,
              counter_prefix="fake:spec_decode_", generated_counter="fake:generation_tokens_total",
              server=server, unavailable=lambda: None, complete=complete, dtype="float32",
              record=record, write_broken=write_broken, broken_faults=lambda: ("layer-ids+1",),
              knobs=knobs, render_knobs=render_knobs, draft_flags=draft_flags, captures=captures,
              target_needs="FakeEngine: the target class must hand over its aux states")


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


def test_a_fake_engine_entry_gets_knobs_tune_flags_and_captures(tmp_path, capsys):
    """The same entry's speculation conventions: `profile --to fake` (its choices come from the
    registry) prints its settings from the profile, `tune` adds its flags to the best k (text and
    JSON), the doctor's aux-ids evidence names what it captures, and the serving notes carry its
    needs; after the block `--to fake` is refused."""
    from eagle_nb.engines import knobs as EK
    from eagle_nb.model.architectures import ARCHITECTURES
    from eagle_nb.profiles.profile import SpeculationProfile, write_profile
    prof = write_profile(SpeculationProfile.from_histogram([20, 25, 25, 20, 10], 4), tmp_path / "p.json")
    with registry.registered(FAKE):
        assert EK.names()[-1] == "fake"
        code, out, err = run(capsys, "profile", "--from", str(prof), "--to", "fake",
                             "--num-speculative-tokens", "2")
        assert code == 0 and "FAKE_ACCEPTED=1.350 fake-serve TARGET --fake-depth 2" in out, err
        code, out, err = run(capsys, "profile", "--from", str(prof), "--to", "fake", "--json")
        assert json.loads(out)["engines"]["fake"]["env"] == {"FAKE_ACCEPTED": "1.750"}, err
        code, out, err = run(capsys, "tune", str(prof), "--t-draft", "0.1", "--t-verify", "1.0")
        assert code == 0 and "; FakeEngine --fake-depth 3" in out, err
        code, out, err = run(capsys, "tune", str(prof), "--t-draft", "0.1", "--t-verify", "1.0", "--json")
        assert json.loads(out)["best"]["1"]["flags"]["fake"] == {"--fake-depth": 3}, err
        code, out, err = run(capsys, "doctor", "--drafter", str(CODE_DRAFTER_SPECULATORS), "--target",
                             str(CODE_TARGET), "--static-only", "--json")
        aux = next(c for c in json.loads(out)["checks"] if c["id"] == "aux-ids")
        assert "FakeEngine (reads the default) captures" in aux["evidence"], err
        notes = serving_notes(ARCHITECTURES["LlamaForCausalLM"], registry.target_needs())
        assert notes[-1] == FAKE.target_needs
    code, _, err = run(capsys, "profile", "--from", str(prof), "--to", "fake")
    assert code == 2 and "invalid choice: 'fake'" in err
