"""The doctor's static part, its observation readers, crash texts, ranking and JSON schema: fast,
no generation. Planted checkpoints are the shipped drafter with one thing broken."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle_nb.engines import crashes
from eagle_nb.doctor import diagnosis
from eagle_nb.engines import observation as observed
from eagle_nb.doctor import ranking
from eagle_nb.doctor.run import doctor
from eagle_nb.doctor.static_checks import run_static
from eagle_nb.io.paths import CODE_DRAFTER, CODE_DRAFTER_SPECULATORS, CODE_TARGET
from helpers import plant


def statuses(d):
    return {c.id: c.status for c in d.checks}


# -- the healthy shipped pair ----------------------------------------------------------------------
@pytest.mark.parametrize("drafter", [CODE_DRAFTER_SPECULATORS, CODE_DRAFTER], ids=["C", "A"])
def test_shipped_pair_static_no_fail_and_healthy(drafter):
    """Both shipped formats: no check fails, the verdict is healthy, and the aux-id check reports
    what each engine would capture ([2, 4, 5] for this 8-layer target)."""
    d = doctor(drafter, dynamic=False)
    assert "fail" not in statuses(d).values(), d.text()
    assert d.healthy and d.verdict.cause == "healthy"
    aux = d.check("aux-ids")
    assert aux.status == "pass" and "vLLM captures [2, 4, 5]" in aux.evidence
    assert "relative difference" in d.check("embed-tokens").evidence or drafter == CODE_DRAFTER


# -- planted faults: static evidence names them ------------------------------------------------------
def _absolute(st):
    st["d2t"] = st["d2t"] + torch.arange(st["d2t"].numel())
    return st


def _no_lm_head(st):
    del st["lm_head.weight"]
    return st


def _no_vocab_buffers(st):
    return {k: v for k, v in st.items() if k not in ("d2t", "t2d")}


PLANTED = {
    "d2t-absolute": dict(weights=_absolute),
    "lm-head-missing": dict(weights=_no_lm_head),
    "layers0-keys-dropped": dict(config=lambda c: (c.pop("speculators_model_type"),
                                                    c.update(c.pop("transformer_layer_config"),
                                                             architectures=["LlamaForCausalLM"]))),
    "draft-num-layers": dict(config=lambda c: c["transformer_layer_config"].update(num_hidden_layers=8)),
    "fc-width-mismatch": dict(config=lambda c: c.update(eagle_aux_hidden_state_layer_ids=[1, 2, 4, 5])),
}


@pytest.mark.parametrize("fault", sorted(PLANTED))
def test_planted_checkpoint_static_verdict_names_the_fault(tmp_path, fault):
    """A checkpoint broken in one way: a check fails and the verdict (basis 'static') names that
    fault, with a fix."""
    d = doctor(plant(tmp_path, **PLANTED[fault]), CODE_TARGET, dynamic=False)
    assert d.verdict.cause == fault, d.text()
    assert d.verdict.basis == "static" and d.verdict.fix
    assert any(fault in c.faults for c in d.checks if c.status == "fail")


def test_d2t_in_a_side_file_is_named(tmp_path):
    """d2t/t2d saved next to the weights instead of inside them: 'd2t-side-file', naming the file."""
    def side(st):
        torch.save({"d2t": st["d2t"]}, tmp_path / "side_d2t.pt")
        return _no_vocab_buffers(st)
    out = plant(tmp_path, weights=side)
    shutil.copy(tmp_path / "side_d2t.pt", out / "d2t.pt")
    d = doctor(out, CODE_TARGET, dynamic=False)
    assert d.verdict.cause == "d2t-side-file" and "d2t.pt" in d.check("d2t").evidence


def test_vocab_mismatch_against_a_planted_target(tmp_path):
    """A target whose config says another vocabulary: the vocab check fails (config read only)."""
    t = tmp_path / "t"
    shutil.copytree(CODE_TARGET, t)
    cfg = json.loads((t / "config.json").read_text())
    cfg["vocab_size"] = 5000
    (t / "config.json").write_text(json.dumps(cfg))
    d = doctor(CODE_DRAFTER_SPECULATORS, t, dynamic=False)
    assert d.check("vocab").status == "fail" and d.verdict.cause == "vocab-mismatch"


def test_sglang_config_ids_and_engine_captures(tmp_path):
    """A format-B config whose nested (output-of-layer) ids are the HF ids [2, 4, 5] written as-is:
    the kit reads HF [3, 5, 6]; vLLM ignores nested ids and captures its default [2, 4, 5], one
    boundary earlier than trained: a warning that names 'layer-ids-1'."""
    def to_b(c):
        c.pop("speculators_model_type")
        c.update(c.pop("transformer_layer_config"), architectures=["LlamaForCausalLMEagle3"],
                 eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 4, 5]})
        c.pop("eagle_aux_hidden_state_layer_ids")

    def rename(st):
        return {("midlayer." + k[len("layers.0."):] if k.startswith("layers.0.") else k): v
                for k, v in st.items() if k != "embed_tokens.weight"}
    checks, rep, _, _ = run_static(plant(tmp_path, weights=rename, config=to_b), CODE_TARGET)
    aux = next(c for c in checks if c.id == "aux-ids")
    assert rep.config.aux_layer_ids == [3, 5, 6]
    assert aux.status == "warn" and "layer-ids-1" in aux.faults and "vLLM captures [2, 4, 5]" in aux.evidence


def test_wrapper_target_layout_warns(tmp_path):
    """A target whose decoder weights live under `model.language_model.layers`: engine-style capture
    would not find them ('wrapper-capture')."""
    t = tmp_path / "w"
    t.mkdir()
    cfg = json.loads((CODE_TARGET / "config.json").read_text())
    (t / "config.json").write_text(json.dumps({"architectures": ["LlavaForConditionalGeneration"],
                                               "text_config": cfg}))
    st = load_file(str(CODE_TARGET / "model.safetensors"))
    save_file({k.replace("model.", "model.language_model.", 1): v for k, v in st.items()},
              str(t / "model.safetensors"))
    checks, _, _, meta = run_static(CODE_DRAFTER_SPECULATORS, t)
    lay = next(c for c in checks if c.id == "target-layout")
    assert meta.num_layers == 8 and lay.status == "warn" and lay.faults == ["wrapper-capture"]
    assert next(c for c in checks if c.id == "embed-tokens").status == "pass"   # found nested


# -- observations ------------------------------------------------------------------------------------
VLLM = ("INFO 11-30 08:00:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 1.05, "
        "Accepted throughput: 0.50 tokens/s, Drafted throughput: 40.00 tokens/s, Accepted: 5 tokens, "
        "Drafted: 400 tokens, Per-position acceptance rate: 0.040, 0.010, 0.000, 0.000, "
        "Avg Draft acceptance rate: 1.2%")
SGLANG = ("[2026-11-30 08:00:00] Decode batch. #running-req: 1, #token: 90, token usage: 0.00, "
          "accept len: 1.05, accept rate: 0.21, cuda graph: True, gen throughput (token/s): 50.1, "
          "#queue-req: 0")


def test_parse_vllm_and_sglang_log_lines():
    """vLLM: tau from the per-position rates (chain: 1 + sum), depth from their count; SGLang: the
    accept len, and the depth its accept rate implies (k = 4); unrelated lines are ignored,
    acceptance-like garbage is counted."""
    o = observed.from_log("starting\n" + VLLM + "\n" + VLLM + "\nacceptance ???\n")
    assert o.engine == "vllm" and o.depth == 4 and o.lines == 2 and o.unparsed == 1
    assert o.tau == pytest.approx(1.05) and o.per_position == pytest.approx([0.04, 0.01, 0, 0])
    s = observed.from_log(SGLANG)
    assert s.engine == "sglang" and s.tau == pytest.approx(1.05) and s.depth == 4   # 1.05 / 5 = 0.21
    with pytest.raises(ValueError, match="no vLLM"):
        observed.from_log("nothing here")


def test_parse_prometheus_metrics():
    """vLLM counters (with the server's _total suffix): tau = 1 + accepted / drafts, per-position
    = accepted at i / drafts."""
    text = "\n".join(["# HELP x", 'vllm:spec_decode_num_drafts_total{model_name="m"} 100.0',
                      'vllm:spec_decode_num_draft_tokens_total{model_name="m"} 400.0',
                      'vllm:spec_decode_num_accepted_tokens_total{model_name="m"} 150.0',
                      *[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name="m",'
                        f'position="{i}"}} {v}' for i, v in enumerate([70, 40, 25, 15])]])
    o = observed.from_metrics(text)
    assert o.tau == pytest.approx(2.5) and o.per_position == pytest.approx([0.7, 0.4, 0.25, 0.15])


def test_observation_arguments_are_checked():
    """One source at a time; tau within [1, 1 + depth]; per-position length = depth."""
    with pytest.raises(ValueError, match="one of"):
        observed.observe(log="x", tau=1.5)
    with pytest.raises(ValueError, match="outside"):
        observed.from_numbers(0.5, depth=4)
    with pytest.raises(ValueError, match="per-position"):
        observed.from_numbers(1.5, [0.5], depth=4)


# -- crash texts --------------------------------------------------------------------------------------
def test_crash_texts_are_torch_own_and_recognised():
    """fc fed two states instead of three: the text is what torch raises for that matmul; every
    crash fault's reproduced text is recognised as that fault in a log."""
    msg = crashes.reproduce("fc-width-mismatch", tokens=7, fc_in=576, hidden=192, n_states=2)
    assert msg == "mat1 and mat2 shapes cannot be multiplied (7x384 and 576x192)"
    for name in crashes.crash_faults():
        log = f"ERROR 11-30 worker.py:1] RuntimeError: {crashes.reproduce(name)}\nINFO other"
        assert [n for n, _ in crashes.recognise(log)] == [name]


@pytest.mark.parametrize("crash", sorted(crashes.crash_faults()))
def test_log_with_a_crash_gives_a_log_verdict(tmp_path, crash):
    """A log carrying an engine's crash text (as `crashes.reproduce` writes it for this fault):
    the verdict names that crash-only fault, from the log, with its fix."""
    f = tmp_path / "engine.log"
    f.write_text(f"INFO loading\nERROR RuntimeError: {crashes.reproduce(crash)}\nINFO exit\n")
    d = doctor(CODE_DRAFTER_SPECULATORS, observed_log=f, dynamic=False)
    assert d.verdict.cause == crash and d.verdict.basis == "log" and d.verdict.fix
    assert d.observation["crash_lines"] and d.hypotheses[0].fault == crash


# -- ranking -------------------------------------------------------------------------------------------
def P(tau, per, se=0.0):
    return ranking.Profile(len(per), tau, se, tuple(per), tuple(0.0 for _ in per))


def test_rank_picks_the_nearest_profile_and_reports_ties():
    """The hypothesis whose prediction is nearest wins; one within TIE_Z of it is a tie; weights
    sum to 1; a far-off observation gets low confidence."""
    preds = {"healthy": P(3.0, [0.7, 0.5, 0.45, 0.35]), "a": P(1.0, [0, 0, 0, 0]),
             "b": P(1.04, [0.04, 0, 0, 0]), "c": P(1.6, [0.4, 0.15, 0.05, 0.0])}
    r = ranking.rank(preds, 1.05, [0.05, 0, 0, 0])
    assert r[0][0] == "b" and r[0][2] > 0.9     # per-position separates a from b
    assert sum(w for _, _, w in r) == pytest.approx(1)
    r = ranking.rank(preds, 1.03)
    assert {r[0][0], *ranking.ties(r)} >= {"a", "b"}
    assert ranking.rank(preds, 3.02)[0][0] == "healthy"
    assert ranking.confidence(ranking.rank(preds, 2.3)) == "low"


def test_profile_bootstrap_se_is_zero_for_identical_prompts_and_positive_otherwise():
    same = ranking.profile_from_counts([[2, 2, 2]] * 4, depth=4)
    assert same.tau == 3 and same.tau_se == 0
    mixed = ranking.profile_from_counts([[0, 0], [4, 4], [2, 1], [3, 0]], depth=4)
    assert mixed.tau_se > 0 and mixed.per_position[0] == pytest.approx(5 / 8)


# -- schema --------------------------------------------------------------------------------------------
def test_json_schema_is_stable_and_documented(tmp_path):
    """The JSON carries exactly the documented keys (top level and per check), and round-trips."""
    d = doctor(plant(tmp_path, weights=_absolute), CODE_TARGET, dynamic=False, observed_tau=1.05, depth=4)
    j = json.loads(d.to_json())
    assert set(j) == set(diagnosis.SCHEMA) and j["schema_version"] == diagnosis.SCHEMA_VERSION
    assert set(j["verdict"]) == set(diagnosis.SCHEMA["verdict"])
    assert all(set(c) == set(diagnosis.SCHEMA["checks"][0]) for c in j["checks"])
    assert all(c["status"] in diagnosis.STATUSES for c in j["checks"])
    assert j["verdict"]["cause"] == "d2t-absolute"


# -- every "static check sees it" claim of the catalogue, planted ---------------------------------------
def _random_embed(st):
    g = torch.Generator().manual_seed(1)
    e = st["embed_tokens.weight"]
    st["embed_tokens.weight"] = (torch.randn(e.shape, generator=g) * e.float().std()).to(e.dtype)
    return st


def _zero_d2t(st):
    st["d2t"] = torch.zeros_like(st["d2t"])
    return st


def _with_input_norm(st):
    st["input_norm.weight"] = torch.ones(st["fc.weight"].shape[1], dtype=st["fc.weight"].dtype)
    return st


SEEN = {   # fault -> (planted edit, check id, status)
    "embed-random": (dict(weights=_random_embed), "embed-tokens", "warn"),
    "rope-theta-wrong": (dict(config=lambda c: c["transformer_layer_config"].update(rope_theta=5e5)),
                         "rope", "warn"),
    "norm-before-residual-forced": (dict(config=lambda c: c.pop("norm_before_residual")),
                                    "config-flags", "warn"),
    "norm-before-fc-dropped": (dict(weights=_with_input_norm, config=lambda c: c.update(norm_before_fc=True)),
                               "config-flags", "warn"),
    "norm-output-dropped": (dict(config=lambda c: c.update(norm_output=True)), "config-flags", "warn"),
    "d2t-identity": (dict(weights=_zero_d2t), "d2t", None),
    "layers0-keys-dropped": (PLANTED["layers0-keys-dropped"], "keys", "fail"),
    "lm-head-missing": (PLANTED["lm-head-missing"], "lm-head", "fail"),
    "d2t-absolute": (PLANTED["d2t-absolute"], "d2t", "fail"),
    "draft-num-layers": (PLANTED["draft-num-layers"], "config-flags", "fail"),
    "fc-width-mismatch": (PLANTED["fc-width-mismatch"], "fc-width", "fail"),
}


@pytest.mark.parametrize("fault", sorted(SEEN))
def test_static_check_named_in_the_catalogue_sees_the_planted_fault(tmp_path, fault):
    """For each fault whose registry entry says a static check sees it (`static`), a checkpoint
    with that fault planted makes that check leave 'pass' and name the fault."""
    from eagle_nb.experiment.faults import entry
    edit, check_id, status = SEEN[fault]
    assert entry(fault).static.check == check_id and entry(fault).static.text.startswith(check_id)
    checks, _, _, _ = run_static(plant(tmp_path, **edit), CODE_TARGET)
    c = next(c for c in checks if c.id == check_id)
    assert c.status != "pass" and (status is None or c.status == status), c
    assert fault in c.faults, c


def test_observed_url_reads_a_metrics_endpoint():
    """--observed-url: the /metrics page of a (local, fake) server is fetched and parsed."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    body = ("vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_accepted_tokens_total 5\n"
            + "".join(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}\n'
                      for i, v in enumerate([4, 1, 0, 0]))).encode()

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/metrics" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    srv = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        o = observed.observe(url=f"http://127.0.0.1:{srv.server_port}")
    finally:
        srv.shutdown()
    assert o.tau == pytest.approx(1.5) and o.per_position == pytest.approx([0.4, 0.1, 0, 0])
    assert o.engine == "vllm" and o.source.endswith("/metrics")


def test_cli_doctor_static_json_and_exit_status(tmp_path):
    """`eagle-nb doctor --static-only --json`: exit 0 and cause 'healthy' on the shipped drafter,
    exit 1 naming the fault on a planted one; the JSON has the documented top-level keys; a
    per-position list without a tau is a clear error."""
    import os
    import subprocess
    import sys
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "eagle_nb", "doctor", *args], capture_output=True,
                              text=True, env=env, timeout=300)
    p = cli("--drafter", str(CODE_DRAFTER_SPECULATORS), "--static-only", "--json")
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert set(j) == set(diagnosis.SCHEMA) and j["verdict"]["cause"] == "healthy"
    p = cli("--drafter", str(plant(tmp_path, weights=_no_lm_head)), "--target", str(CODE_TARGET), "--static-only")
    assert p.returncode == 1 and "cause: lm-head-missing" in p.stdout
    p = cli("--drafter", str(CODE_DRAFTER_SPECULATORS), "--static-only", "--observed-per-position", "0.5")
    assert p.returncode == 2 and "needs --observed-tau" in p.stderr
