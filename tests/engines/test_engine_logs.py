"""Engine log and metrics readers on fixtures built from the engines' own format strings (vLLM
`v1/spec_decode/metrics.py`; SGLang `scheduler_metrics_mixin.py` before and after PR #23530), the
counter -> metrics reconstruction, the verdict, and the broken-checkpoint writer. No engine needed;
real vLLM output is parsed in test_engine.py."""
from __future__ import annotations

import json
import random

import pytest
import torch
from safetensors.torch import load_file

from eagle_nb.engines import (Counters, infer_sglang_formula, metrics_from_counters, parse_log,
                              parse_metrics, write_broken_drafter)
from eagle_nb.engines.agreement import agreement
from eagle_nb.engines.comparison import judge
from eagle_nb.loop.metrics import acceptance_metrics
from eagle_nb.io.paths import CODE_DRAFTER_SPECULATORS, CODE_TARGET


def vllm_line(m, t="11-30 08:53:46", prefix="(APIServer pid=12079) "):
    """vLLM 0.32's SpecDecoding logger, field for field."""
    rates = ", ".join(f"{r:.3f}" for r in m.per_position_acceptance)
    return (f"{prefix}INFO {t} [metrics.py:120] SpecDecoding metrics: Mean acceptance length: "
            f"{m.accept_length:.2f}, Accepted throughput: 344.45 tokens/s, Drafted throughput: "
            f"684.90 tokens/s, Accepted: {m.accepted} tokens, Drafted: {m.drafted} tokens, "
            f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: "
            f"{100 * m.draft_acceptance_rate:.1f}%")


def sglang_line(accept_len, rate, t="2025-11-20 10:00:01"):
    """SGLang's decode-batch log line (the accept part is the same under both formulas)."""
    return (f"[{t} TP0] Decode batch, #running-req: 4, #token: 1234, token usage: 0.01, "
            f"accept len: {accept_len:.2f}, accept rate: {rate:.2f}, cuda graph: True, "
            f"gen throughput (token/s): 512.30, #queue-req: 0, ")


def traces(n_lines=6, k=4, seed=0):
    rng = random.Random(seed)
    return [acceptance_metrics([rng.choice(range(k + 1)) if rng.random() < 0.8 - 0.1 * i else 0
                                for _ in range(50)], k) for i in range(n_lines)]


def test_vllm_lines_parse_and_pool_like_the_counters():
    ms = traces()
    text = "\n".join(["INFO unrelated startup line"] + [vllm_line(m, t=f"11-30 08:53:{40 + i}")
                                                         for i, m in enumerate(ms)])
    p = parse_log(text)
    assert p.summary["counts"] == {"lines": 7, "vllm": 6, "sglang": 0, "llama.cpp": 0, "malformed": 0,
                                   "other": 1}     # one count per registered engine
    assert list(p.df.accept_length) == [round(m.accept_length, 2) for m in ms]
    assert p.df.per_position[0] == pytest.approx(ms[0].per_position_acceptance, abs=5e-4)
    assert p.df.time.notna().all() and p.df.time.is_monotonic_increasing
    pooled = acceptance_metrics([a for m in ms for a in sum(([j] * c for j, c in enumerate(m.accept_counts)), [])], 4)
    v = p.summary["vllm"]
    assert v["accept_length"] == pytest.approx(pooled.accept_length, abs=1e-9)
    assert v["per_position_acceptance"] == pytest.approx(pooled.per_position_acceptance, abs=1e-3)


def test_truncated_and_unknown_lines_are_counted_never_raised():
    m = traces(1)[0]
    good = vllm_line(m)
    text = "\n".join([good, good[:100], good[: good.index("Avg Draft") + 12], "accept len: ???",
                      sglang_line(1.05, 0.21)[: sglang_line(1.05, 0.21).index("accept rate")], "\x00\xff garbage", "", sglang_line(2.0, 0.4)])
    p = parse_log(text)
    c = p.summary["counts"]
    assert (c["vllm"], c["sglang"], c["malformed"]) == (1, 1, 4)
    assert [e["line_no"] for e in p.summary["malformed_examples"]] == [2, 3, 4, 5]
    assert parse_log("").df.empty and parse_log("").summary["counts"]["lines"] == 0


@pytest.mark.parametrize("formula", ["by_draft_tokens", "by_drafts"])
def test_sglang_formula_is_inferred_from_the_numbers(formula):
    """Lines printed under each formula (num_draft_tokens = k + 1 = 5) are attributed to it, and
    draft acceptance rate is recovered."""
    ms = traces(8)
    rate = (lambda m: m.sglang_accept_rate_by_draft_tokens) if formula == "by_draft_tokens" \
        else (lambda m: m.draft_acceptance_rate)
    text = "\n".join(sglang_line(m.accept_length, rate(m)) for m in ms)
    p = parse_log(text)
    s = p.summary["sglang"]
    assert (s["formula"], s["num_draft_tokens"], s["explains"]) == (formula, 5, 1.0)
    assert p.df.draft_acceptance_rate.tolist() == pytest.approx(
        [m.draft_acceptance_rate for m in ms], abs=0.01)
    pinned = parse_log(text, num_draft_tokens=5).summary["sglang"]
    assert pinned["formula"] == formula


def test_sglang_worked_example_and_ambiguity():
    """accept len 1.05 / accept rate 0.21 is the old formula with 5 draft tokens; a single line
    with every draft accepted fits both formulas and is reported as ambiguous."""
    assert infer_sglang_formula([1.05], [0.21]) | {"meaning": ""} == \
        {"formula": "by_draft_tokens", "num_draft_tokens": 5, "explains": 1.0, "meaning": ""}
    amb = infer_sglang_formula([5.0], [1.0], 5)
    assert amb["formula"] == "ambiguous"
    assert infer_sglang_formula([1.5], [1.3])["formula"].startswith("pre-#11572")


def test_prometheus_counters_parse_sum_and_difference():
    page = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 300.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 43.0
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 1372.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 690.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 175.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 229.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="3"} 132.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 154.0
vllm:generation_tokens_total{model_name="m"} 1024.0
vllm:spec_decode_num_drafts_created 1.7e9
"""
    c = parse_metrics(page)
    assert (c.engine, c.num_drafts, c.accepted_per_pos, c.generation_tokens) == \
        ("vllm", 343.0, [229.0, 175.0, 154.0, 132.0], 1024.0)
    zero = Counters("vllm", 0, 0, 0, [0, 0, 0, 0])
    assert (c - zero).num_accepted_tokens == 690
    with pytest.raises(RuntimeError, match="restarted"):
        zero - c
    sg = parse_metrics('sglang:spec_accept_length{model_name="m"} 1.05\nsglang:spec_accept_rate 0.21\n')
    assert sg.engine == "sglang" and sg.gauges == {"spec_accept_length": 1.05, "spec_accept_rate": 0.21}


def test_counters_give_every_kit_metric_exactly():
    """A chain's counters fix the accepted-count histogram, so every metric equals the kit's own."""
    m = traces(1, k=5, seed=3)[0]
    n = m.verify_steps
    reach = [round(p * n) for p in m.per_position_acceptance]
    c = Counters("vllm", n, n * 5, m.accepted, reach)
    assert metrics_from_counters(c, 5) == m
    with pytest.raises(ValueError, match="depth 4"):
        metrics_from_counters(c, 4)
    with pytest.raises(ValueError, match="not a chain"):
        metrics_from_counters(Counters("vllm", n, n * 5, m.accepted + 3, reach), 5)


def test_verdict_and_agreement():
    a = acceptance_metrics([4, 4, 3, 0, 2] * 40, 4)
    b = acceptance_metrics([4, 4, 3, 0, 1] * 40, 4)
    c = acceptance_metrics([1, 0, 0, 0, 2] * 40, 4)
    assert judge(a, a, 0.0)[0] == "match"
    kind, text, _ = judge(a, b, 0.0, tau_tol=0.5, pos_tol=0.5)
    assert kind == "match"
    kind, text, tol = judge(a, c, 0.0)
    assert kind == "under-accepts" and "delta tau -2.00" in text and tol["tau"] == 0.10
    ag = agreement([[1, 2, 3], [1, 2, 3], [5]], [[1, 2, 3, 9], [1, 7, 3], None])
    assert ag["identical"] == 1 and ag["first_divergence"] == [None, 1] and ag["prompts"] == 3


def test_broken_checkpoints_change_only_their_field(tmp_path):
    src = CODE_DRAFTER_SPECULATORS
    a = write_broken_drafter(src, tmp_path / "ids", "layer-ids+1")
    cfg0, cfg1 = (json.loads((p / "config.json").read_text()) for p in (src, a))
    assert cfg1["eagle_aux_hidden_state_layer_ids"] == [i + 1 for i in cfg0["eagle_aux_hidden_state_layer_ids"]]
    assert {k: v for k, v in cfg1.items() if k != "eagle_aux_hidden_state_layer_ids"} == \
        {k: v for k, v in cfg0.items() if k != "eagle_aux_hidden_state_layer_ids"}
    d = write_broken_drafter(src, tmp_path / "d2t", "d2t-absolute")
    w0, w1 = load_file(str(src / "model.safetensors")), load_file(str(d / "model.safetensors"))
    assert torch.equal(w1["d2t"] + torch.arange(w0["d2t"].numel()), w0["d2t"])   # i + d2t'[i] = offset[i]
    assert all(torch.equal(w0[k], w1[k]) for k in w0 if k != "d2t")
    with pytest.raises(ValueError, match="unknown checkpoint fault"):
        write_broken_drafter(src, tmp_path / "x", "fc-bypass")


def test_null_layer_ids_are_shifted_from_the_targets_default_or_refused(tmp_path):
    """A speculators config with null aux ids (the engine's default; the real drafter's copy): with
    the target, the EAGLE default for its layer count is written out, then shifted; without it, the
    refusal names the null key."""
    import shutil
    src = shutil.copytree(CODE_DRAFTER_SPECULATORS, tmp_path / "null")
    cfg = json.loads((src / "config.json").read_text())
    cfg["eagle_aux_hidden_state_layer_ids"] = None
    (src / "config.json").write_text(json.dumps(cfg))
    a = write_broken_drafter(src, tmp_path / "ids", "layer-ids+1", CODE_TARGET)
    assert json.loads((a / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [3, 5, 6]
    d = write_broken_drafter(src, tmp_path / "d2t", "d2t-absolute", CODE_TARGET)
    assert json.loads((d / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    with pytest.raises(ValueError, match="eagle_aux_hidden_state_layer_ids' is null"):
        write_broken_drafter(src, tmp_path / "x", "layer-ids+1")


def test_eagle_format_without_ids_gets_the_default_written_then_shifted(tmp_path):
    """An EAGLE-format config names no aux ids (the engine's default is implied): with the
    target, vLLM's top-level field is written with the default ids shifted one boundary, which
    the kit's loader reads back; without the target the refusal names the missing key."""
    from eagle_nb.checkpoints.load import load_drafter
    from eagle_nb.io.paths import CODE
    assert "eagle_aux_hidden_state_layer_ids" not in json.loads((CODE.drafter / "config.json").read_text())
    a = write_broken_drafter(CODE.drafter, tmp_path / "ids", "layer-ids+1", CODE_TARGET)
    assert json.loads((a / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"] == [3, 5, 6]
    assert load_drafter(str(a), CODE_TARGET).config.aux_layer_ids == [3, 5, 6]
    with pytest.raises(ValueError, match="has no 'eagle_aux_hidden_state_layer_ids' to shift"):
        write_broken_drafter(CODE.drafter, tmp_path / "x", "layer-ids-1")


def test_cli_engine_log(tmp_path, capsys):
    from eagle_nb.cli.main import main
    f = tmp_path / "sglang.log"
    f.write_text("\n".join([sglang_line(1.05, 0.21), sglang_line(1.06, 0.21), "truncated accept len: 1."]))
    with pytest.raises(SystemExit) as e:
        main(["engine", "log", str(f), "--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["counts"]["sglang"] == 2 and out["summary"]["counts"]["malformed"] == 1
    assert out["summary"]["sglang"]["formula"] == "by_draft_tokens"
    with pytest.raises(SystemExit) as e:
        main(["engine", "log", str(tmp_path / "missing.log")])
    assert e.value.code == 2


def test_sampling_widens_the_tolerance():
    """At T > 0 the tau tolerance is at least twice the standard error of the difference, and a
    difference well inside it is still a match; at T = 0 the measured greedy tolerance holds."""
    a = acceptance_metrics([4, 0, 2, 1, 3] * 20, 4)
    b = acceptance_metrics([4, 0, 2, 1, 3] * 18 + [4, 0, 2, 1, 2] * 2, 4)
    kind, _, tol = judge(a, b, 1.0)
    assert tol["tau"] >= 2 * tol["tau_sampling_se"] > 0.10 and kind == "match"
    c = acceptance_metrics([4, 0, 2, 1, 2] * 20, 4)                 # delta tau -0.20
    kind, _, tol0 = judge(a, c, 0.0)
    assert kind == "under-accepts" and tol0["tau"] == 0.10


def test_the_doctor_and_the_engines_read_logs_and_metrics_alike():
    """One reader per source (engines.logs, engines.metrics): a truncated vLLM line is malformed
    for both the engines' table and the doctor's observation, and the doctor's tau from a
    /metrics page is the engines' counters' 1 + accepted / drafts."""
    from eagle_nb.engines import observation as observed
    m = traces(1)[0]
    text = "\n".join([vllm_line(m), vllm_line(m)[:100], "acceptance ???"])
    p, o = parse_log(text), observed.from_log(text)
    assert p.summary["counts"]["vllm"] == o.lines == 1 and p.summary["counts"]["malformed"] == 1
    assert o.unparsed == 2 and o.tau == pytest.approx(1 + sum(p.df.per_position[0]))
    page = ('vllm:spec_decode_num_drafts_total 40\nvllm:spec_decode_num_accepted_tokens_total 30\n'
            + "".join(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}\n'
                      for i, v in enumerate([20, 10])))
    c, ob = parse_metrics(page), observed.from_metrics(page)
    assert ob.tau == pytest.approx(1 + c.num_accepted_tokens / c.num_drafts) == 1.75
    assert ob.per_position == pytest.approx([x / c.num_drafts for x in c.accepted_per_pos])
