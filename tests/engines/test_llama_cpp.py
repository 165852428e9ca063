"""llama.cpp as the second engine: its counters and log lines parsed (always run, from text), and,
with the `llama-server` that `make engine` builds, the shipped pair converted to GGUF and served
with `--spec-type draft-eagle3` against the kit's reference loop on the same token ids, greedy,
k = 4; the two planted GGUF faults against the kit's ablations of the same name.

The live tests are skipped, naming the reason (no binary, or the recorded build failure), only
when no llama-server exists. One server per configuration (healthy, layer-ids+1, d2t-absolute).
"""
from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from eagle_nb.engines import (
    LlamaServer,
    compare,
    llama_unavailable_reason,
    parse_log,
    parse_metrics,
)
from eagle_nb.engines.comparison import (
    GREEDY_POS_TOL,
    GREEDY_TAU_TOL,
    metrics_from_counters,
)
from eagle_nb.engines.llama_cpp import LLAMA_CPP_PYTHON, as_gguf, llama_command
from eagle_nb.engines.server import group_members, port_in_use
from helpers import code_pair, code_prompts
from eagle_nb.io.paths import REPO_ROOT, CODE_DRAFTER, CODE_TARGET

REASON = llama_unavailable_reason()
live = pytest.mark.skipif(REASON is not None, reason=f"no llama.cpp: {REASON}")
K = 4

METRICS = """# HELP llamacpp:spec_decode_num_drafts_total Speculative: Total verification steps
# TYPE llamacpp:spec_decode_num_drafts_total counter
llamacpp:tokens_predicted_total 128
llamacpp:spec_decode_num_draft_tokens_total 160
llamacpp:spec_decode_num_accepted_tokens_total 88
llamacpp:spec_decode_num_drafts_total 40
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 30
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 25
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 18
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="3"} 15
"""
LOG = """slot update_slots: id  0 | task 0 | accepted  4/ 4 draft tokens
slot update_slots: id  0 | task 0 | accepted  1/ 4 draft tokens
slot update_slots: id  0 | task 0 | accepted  0/ 4 draft tokens
slot update_slots: id  0 | task 0 | accepted  2/ 2 draft tokens
slot print_timing: id  0 | task 0 | draft acceptance = 0.50000 (    7 accepted /    14 generated), mean len =  2.75
slot print_timing: id  0 | task 9 | draft acceptance = 0.5
"""


def test_llama_counters_become_the_kits_metrics():
    """llama-server's counters have vLLM's shape: the chain's histogram, hence every metric."""
    c = parse_metrics(METRICS)
    assert c.engine == "llama.cpp" and c.num_drafts == 40 and c.accepted_per_pos == [30, 25, 18, 15]
    assert c.generation_tokens == 128
    m = metrics_from_counters(c, K)
    assert m.accept_length == pytest.approx(1 + 88 / 40) and m.per_position_acceptance[0] == 0.75


def test_llama_log_lines_parse():
    """Per-request lines become rows; the per-step LLAMA_TRACE lines give the exact histogram
    (a short last draft counts as a step); a cut line is malformed, not an error."""
    p = parse_log(LOG)
    assert p.summary["counts"]["llama.cpp"] == 1 and p.summary["counts"]["malformed"] == 1
    row = p.df.iloc[0]
    assert row.engine == "llama.cpp" and row.accept_length == 2.75 and row.drafted_tokens == 14
    s = p.summary["llama.cpp"]
    assert s["verify_steps"] == 4 and s["accept_counts"] == [1, 1, 1, 0, 1] and s["short_drafts"] == 1
    assert s["accept_length"] == 2.75 and s["per_position_acceptance"] == [0.75, 0.5, 0.25, 0.25]
    assert s["verify_steps_from_mean_len"] == 4


def test_missing_binary_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("ENGINE_VENV", str(tmp_path))
    monkeypatch.delenv("EAGLE_NB_LLAMA_SERVER", raising=False)
    assert f"{tmp_path}/llama.cpp-{LLAMA_CPP_PYTHON}/bin/llama-server" in llama_unavailable_reason()
    note = tmp_path / f"llama.cpp-{LLAMA_CPP_PYTHON}" / "BUILD_FAILED"
    note.parent.mkdir()
    note.write_text("cmake not found (apt-get install cmake)\n")
    assert "the last build failed: cmake not found" in llama_unavailable_reason()


def test_makefile_builds_the_version_the_kit_looks_for():
    mk = (REPO_ROOT / "Makefile").read_text()
    assert re.search(rf"^LLAMA_CPP_PYTHON := {re.escape(LLAMA_CPP_PYTHON)}$", mk, re.MULTILINE)
    assert (REPO_ROOT / "scripts" / "build_llama_server.sh").stat().st_mode & 0o111
    cmd = llama_command("llama-server", "t.gguf", "d.gguf", 5, port=8080)
    for flag, value in (("--spec-type", "draft-eagle3"), ("--spec-draft-n-max", "5"), ("--host", "127.0.0.1"),
                        ("--spec-draft-p-min", "0"), ("-np", "1")):
        assert cmd[cmd.index(flag) + 1] == value
    assert "--metrics" in cmd


@pytest.fixture(scope="module")
def pair():
    return code_pair()


@pytest.fixture(scope="module")
def healthy(pair):
    with LlamaServer(CODE_TARGET, CODE_DRAFTER, K) as srv:
        t0 = time.perf_counter()
        res = compare(prompts=code_prompts(), depth=K, max_new_tokens=64, server=srv, pair=pair,
                      engine="llama.cpp")
        res.notes.append(f"compare took {time.perf_counter() - t0:.1f}s after a {srv.startup_s:.1f}s start-up")
        res.notes.append(srv.log_text())
    return res


@live
def test_llama_matches_reference_loop(healthy):
    """Shipped pair in GGUF, greedy, 16 prompts x 64 tokens, k = 4: token-identical outputs, tau
    and every position within the vLLM tolerances; the server's own log lines agree."""
    r, e = healthy.reference, healthy.engine
    print(healthy.table().to_string(), healthy.agreement, healthy.notes[:-1], sep="\n")
    assert healthy.verdict_kind == "match", healthy.verdict
    assert abs(e.accept_length - r.accept_length) <= GREEDY_TAU_TOL
    assert all(abs(g) <= GREEDY_POS_TOL for g in healthy.per_position_gap)
    assert healthy.agreement["identical"] == 16, healthy.agreement
    s = healthy.engine_log.summary["llama.cpp"]
    assert s["requests"] == 16 and s["verify_steps"] == e.verify_steps
    assert s["accept_length"] == pytest.approx(e.accept_length)


@live
@pytest.mark.parametrize("fault", ["layer-ids+1", "d2t-absolute"])
def test_planted_gguf_fault_matches_the_kits_ablation(fault, pair):
    """A GGUF drafter written with the fault; the kit's healthy drafter with the named ablation on
    the reference side: tau agrees within tolerance and the fault costs more than that tolerance.
    The server's process group is gone afterwards."""
    prompts = code_prompts(8)
    with LlamaServer(CODE_TARGET, CODE_DRAFTER, K, fault=fault) as srv:
        pids = srv.group_pids()
        res = compare(prompts=prompts, depth=K, max_new_tokens=64, server=srv, pair=pair,
                      ablations=[fault], engine="llama.cpp")
    ok = pair.run(prompts, depth=K, max_new_tokens=64, progress=False).metrics.accept_length
    print(f"{fault}: llama.cpp tau {res.engine.accept_length:.3f}, ablation "
          f"{res.reference.accept_length:.3f}, healthy {ok:.3f}; {res.verdict}")
    time.sleep(0.5)
    assert [p for p in pids if p in group_members(pids[0])] == [] and not port_in_use(srv.port)
    assert abs(res.delta_tau) <= GREEDY_TAU_TOL, res.verdict
    assert ok - res.reference.accept_length > GREEDY_TAU_TOL


@live
def test_gguf_cache_reuses_conversions():
    a = as_gguf(CODE_DRAFTER, "drafter", target=CODE_TARGET)
    assert as_gguf(CODE_DRAFTER, "drafter", target=CODE_TARGET) == a and Path(a).is_file()
    assert as_gguf(a, "drafter") == a
