"""Tests for eagle_nb.checkpoints (save, load, inspect, convert; and the validation in eagle_nb.checkpoints.validate, and the `inspect` /
`convert` CLI): round trips through every public format, layer-id translation, safe unpickling,
and one crafted bad checkpoint per validation error.

Every checkpoint is a tiny random drafter written to tmp_path; corrupt ones start from a good one
and change exactly one thing.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle_nb.io.paths import REPO_ROOT
from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.checkpoints.convert import convert
from eagle_nb.checkpoints.save import save_drafter
from eagle_nb.checkpoints.load import load_drafter, load_drafter_engine_style
from eagle_nb.checkpoints.inspect import inspect_checkpoint
from eagle_nb.checkpoints.detect import detect_format, read_config
from helpers import AUX_HF, target_for, tiny_drafter, tiny_features, tiny_llama

REPO = REPO_ROOT
CASES = [("eagle", "safetensors"), ("eagle", "bin"), ("sglang", "safetensors"),
         ("speculators", "safetensors")]


@pytest.fixture(scope="module")
def drafter():
    return tiny_drafter(seed=11)


@pytest.fixture(scope="module")
def target(drafter):
    return target_for(drafter)


@pytest.fixture(scope="module")
def inputs(drafter):
    return tiny_features(drafter, B=1, T=6, seed=12)


def _logits(d, inputs):
    with torch.no_grad():
        return d(*inputs)[0]


def _assert_same(a, b, inputs):
    assert set(a.state_dict()) == set(b.state_dict())
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k
    assert torch.equal(_logits(a, inputs), _logits(b, inputs))


# -- round trips ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt,weights", CASES)
def test_round_trip_same_weights_same_logits(tmp_path, drafter, target, inputs, fmt, weights):
    """save_drafter -> load_drafter in each format (and .bin for format A) gives the identical
    drafter (every tensor, incl. d2t/t2d) and identical logits; the format is auto-detected and
    the aux layer ids come back in HF convention."""
    path = save_drafter(drafter, tmp_path / fmt, fmt, weights=weights)
    wfile = "pytorch_model.bin" if weights == "bin" else "model.safetensors"
    assert sorted(p.name for p in path.iterdir()) == sorted(["config.json", wfile])
    assert detect_format(read_config(path)) == fmt
    loaded = load_drafter(path, target=target)
    assert loaded.config.aux_layer_ids == AUX_HF
    _assert_same(drafter, loaded, inputs)


def test_a_loaded_target_decides_the_drafters_dtype_unless_one_is_asked(tmp_path, drafter, target):
    """A bf16 file loaded beside an fp32 target *model* comes back fp32, so the target's captured
    states feed it directly (it used to keep bf16 and fail inside torch on a dtype mismatch);
    `dtype=` still wins, and a target given as a path (never loaded) keeps the file's dtype."""
    from eagle_nb.model.capture import capture
    path = save_drafter(drafter, tmp_path / "bf16", "eagle", dtype=torch.bfloat16)
    d = load_drafter(path, target=target)
    assert d.fc.weight.dtype == torch.float32 and d.embed_tokens.weight.dtype == torch.float32
    ids = torch.tensor([[3, 5, 7, 9]])
    with capture(target, AUX_HF) as states, torch.no_grad():
        target(ids)
        logits = d(ids, states.fused())[0]
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()
    assert load_drafter(path, target=target, dtype=torch.bfloat16).fc.weight.dtype == torch.bfloat16
    target.save_pretrained(tmp_path / "target")
    assert load_drafter(path, target=tmp_path / "target").fc.weight.dtype == torch.bfloat16


@pytest.mark.parametrize("fmt", ["eagle", "sglang", "speculators"])
def test_round_trip_keeps_variant_flags(tmp_path, target, inputs, fmt):
    """A drafter with every variant flag on (norm_before_fc, fc_norm, norm_before_residual,
    norm_output) and their extra norm weights round-trips through each format unchanged (A and B
    cannot express some of them for their own consumers, so they need allow_lossy)."""
    flags = dict(norm_before_fc=True, fc_norm=True, norm_before_residual=True, norm_output=True)
    d = tiny_drafter(seed=13, **flags)
    with torch.no_grad():
        d.embed_tokens.weight.copy_(target.get_input_embeddings().weight)
    lossy = fmt != "speculators"
    loaded = load_drafter(save_drafter(d, tmp_path / fmt, fmt, allow_lossy=lossy), target=target)
    assert {k: getattr(loaded.config, k) for k in flags} == flags
    _assert_same(d, loaded, inputs)


@pytest.mark.parametrize("flag,refused_by", [
    ("fc_norm", ["eagle"]), ("norm_output", ["eagle"]),
    ("norm_before_fc", ["eagle", "sglang"]), ("norm_before_residual", ["eagle", "sglang"])])
def test_save_and_convert_refuse_what_the_format_cannot_express(tmp_path, target, flag, refused_by):
    """EAGLE's Model has no EAGLE-3.1 flags; SGLang 0.5.14 has fc_norm and norm_output but not
    norm_before_fc / norm_before_residual. save_drafter and convert (API and CLI) refuse those
    destinations naming the flag, unless allow_lossy / --allow-lossy; speculators carries all."""
    d = tiny_drafter(seed=14, **{flag: True})
    src = save_drafter(d, tmp_path / "src", "speculators")
    for fmt in ("eagle", "sglang", "speculators"):
        if fmt in refused_by:
            with pytest.raises(CheckpointError, match=rf"cannot express \['{flag}=True'\]"):
                save_drafter(d, tmp_path / f"s_{fmt}", fmt)
            with pytest.raises(CheckpointError, match=rf"cannot convert .* to format '{fmt}'.*{flag}"):
                convert(src, tmp_path / f"c_{fmt}", fmt)
            assert not (tmp_path / f"c_{fmt}" / "config.json").exists()
            out = convert(src, tmp_path / f"l_{fmt}", fmt, allow_lossy=True,
                          drop_embed=fmt == "sglang")   # its own embedding is not the target's
            assert read_config(out)[flag] is True
        else:
            convert(src, tmp_path / f"c_{fmt}", fmt, target=target, drop_embed=fmt == "sglang")
    if "sglang" in refused_by:
        cli = [sys.executable, "-m", "eagle_nb", "convert", str(src), str(tmp_path / "cli"), "--to", "sglang",
               "--drop-embed"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        r = subprocess.run(cli, capture_output=True, text=True, env=env)
        assert r.returncode != 0 and flag in r.stderr + r.stdout
        assert subprocess.run(cli + ["--allow-lossy"], capture_output=True, text=True, env=env).returncode == 0


def test_eagle_format_cannot_express_other_geometries():
    """Format A's consumer (EAGLE cnets.py) hard-codes 3 aux layers, head_dim = H / heads and
    linear/dynamic RoPE scaling only: each is named."""
    from eagle_nb.checkpoints.formats import unsupported_features
    base = tiny_drafter(seed=15).config
    from dataclasses import replace
    assert unsupported_features(base, "eagle") == []
    assert "num_aux=2" in unsupported_features(replace(base, aux_layer_ids=[2, 4]), "eagle")[0]
    assert "head_dim" in unsupported_features(replace(base, head_dim=base.head_dim * 2), "eagle")[0]
    llama3 = {"rope_type": "llama3", "factor": 8.0}
    assert "llama3" in unsupported_features(replace(base, rope_scaling=llama3), "eagle")[0]
    assert unsupported_features(replace(base, rope_scaling={"rope_type": "linear", "factor": 2.0}),
                                "eagle") == []


def test_formats_a_b_need_the_target_embedding(tmp_path, drafter):
    """A/B checkpoints omit embed_tokens (the engines take the target's); C stores it. Loading an
    A checkpoint without a target is refused with a message saying to pass target=."""
    a = save_drafter(drafter, tmp_path / "a", "eagle")
    c = save_drafter(drafter, tmp_path / "c", "speculators")
    assert "embed_tokens.weight" not in load_file(str(a / "model.safetensors"))
    assert "embed_tokens.weight" in load_file(str(c / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"embed_tokens.*target="):
        load_drafter(a)
    load_drafter(c)


def test_convert_chain_a_c_b_a_keeps_logits(tmp_path, drafter, target, inputs):
    """convert() A -> C -> B -> A: every intermediate loads to the same drafter and logits. C -> B
    is given the target, so the stored embedding is checked equal to the target's and dropped."""
    a = save_drafter(drafter, tmp_path / "a", "eagle")
    c = convert(a, tmp_path / "c", "speculators", target=target)
    b = convert(c, tmp_path / "b", "sglang", target=target)
    a2 = convert(b, tmp_path / "a2", "eagle", target=target)
    for p, fmt in [(c, "speculators"), (b, "sglang"), (a2, "eagle")]:
        assert detect_format(read_config(p)) == fmt
        _assert_same(drafter, load_drafter(p, target=target), inputs)


def test_layer_ids_are_translated_between_conventions(tmp_path, drafter, target):
    """HF ids [2,4,5] are written as SGLang nested output-of-layer ids [1,3,4] and as speculators
    top-level ids [2,4,5]; converting B -> C translates rather than copies."""
    b = save_drafter(drafter, tmp_path / "b", "sglang")
    cfg_b = read_config(b)
    assert cfg_b["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    assert "eagle_aux_hidden_state_layer_ids" not in cfg_b
    assert cfg_b["architectures"] == ["LlamaForCausalLMEagle3"]
    c = convert(b, tmp_path / "c", "speculators", target=target)
    cfg_c = read_config(c)
    assert cfg_c["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert cfg_c["speculators_model_type"] == "eagle3"
    assert load_drafter(c).config.aux_layer_ids == [2, 4, 5]
    assert load_drafter(b, target=target).config.aux_layer_ids == [2, 4, 5]


# -- safe unpickling ------------------------------------------------------------------------------
class _Payload:
    """Unpickling this runs os.makedirs(marker): the code-execution a checkpoint must not get."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


def test_bin_with_python_object_is_refused(tmp_path, drafter, target):
    """A pytorch_model.bin whose pickle holds an arbitrary Python object is refused
    (weights_only=True): CheckpointError naming the file, and the payload never runs."""
    path = save_drafter(drafter, tmp_path / "a", "eagle", weights="bin")
    state = torch.load(path / "pytorch_model.bin", weights_only=True)
    marker = tmp_path / "PWNED"
    state["fc.weight"] = _Payload(marker)
    torch.save(state, path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin.*(refused|weights_only)"):
        load_drafter(path, target=target)
    assert not marker.exists(), "loading executed code from the checkpoint"


# -- crafted bad checkpoints ----------------------------------------------------------------------
def _good(tmp_path, drafter, fmt="eagle") -> Path:
    return save_drafter(drafter, tmp_path / f"ckpt_{fmt}", fmt)


def _edit_weights(path: Path, fn) -> Path:
    f = path / "model.safetensors"
    state = load_file(str(f))
    fn(state)
    save_file({k: v.contiguous() for k, v in state.items()}, str(f))
    return path


def _edit_config(path: Path, fn) -> Path:
    f = path / "config.json"
    cfg = json.loads(f.read_text())
    fn(cfg)
    f.write_text(json.dumps(cfg))
    return path


def _unselected(state, n=1):
    return (~state["t2d"]).nonzero().flatten()[:n]


def _absolute(s):
    s["d2t"] = s["t2d"].nonzero().flatten().to(torch.int64)


def _minus_arange(s):                      # offsets taken for ids, arange subtracted by hand
    s["d2t"] = s["d2t"] - torch.arange(s["d2t"].numel())


def _t2d_disagrees(s):
    sel, other = s["t2d"].nonzero().flatten(), _unselected(s)   # both before editing
    s["t2d"][sel[0]] = False
    s["t2d"][other] = True


def _t2d_too_many(s):
    s["t2d"][_unselected(s)] = True


def _dup(s):
    s["d2t"][1] = s["d2t"][0] - 1          # 1 + d2t[1] == 0 + d2t[0]


def _oob(s):
    s["d2t"][-1] = 10 * s["t2d"].numel()


def _to_layers0(s):
    for k in [k for k in s if k.startswith("midlayer.")]:
        s["layers.0." + k[len("midlayer."):]] = s.pop(k)


def _nan(s):
    s["fc.weight"][0, 0] = float("nan")


def _fc_narrow(s):
    s["fc.weight"] = s["fc.weight"][:, :64]


# name -> (weights edit, regexes the CheckpointError message must match)
WEIGHT_FAULTS = {
    "missing_key": (lambda s: s.pop("midlayer.mlp.up_proj.weight"),
                    [r"missing keys \[.*'midlayer\.mlp\.up_proj\.weight'"]),
    "unexpected_key": (lambda s: s.__setitem__("extra.bias", torch.zeros(3)),
                       [r"unexpected keys \[.*'extra\.bias'"]),
    "layers0_in_format_a": (_to_layers0, [r"layers\.0\.", r"speculators"]),
    "fc_width": (_fc_narrow, [r"fc\.weight", r"\b64\b", r"\b96\b"]),
    "d2t_float": (lambda s: s.__setitem__("d2t", s["d2t"].float()), [r"d2t dtype.*float32.*int64"]),
    "d2t_out_of_range": (_oob, [r"d2t", r"out of \[0, 128\) at draft ids \[63\]"]),
    "d2t_duplicates": (_dup, [r"d2t", r"\b1 duplicate"]),
    "d2t_absolute_ids": (_absolute, [r"d2t looks like absolute target ids"]),
    "d2t_minus_arange": (_minus_arange, [r"d2t holds the offsets minus arange", r"d2t \+ arange"]),
    "t2d_disagrees": (_t2d_disagrees, [r"t2d disagrees with d2t"]),
    "t2d_sum": (_t2d_too_many, [r"t2d marks 65 ids but draft_vocab_size is 64"]),
    "nan_weight": (_nan, [r"NaN", r"fc\.weight"]),
    "d2t_missing": (lambda s: (s.pop("d2t"), s.pop("t2d")),
                    [r"d2t missing while draft_vocab_size 64 != vocab_size 128"]),
}


@pytest.mark.parametrize("fault", list(WEIGHT_FAULTS))
def test_bad_weights_are_refused_naming_the_fault(tmp_path, drafter, target, fault):
    """Each crafted weight fault makes load_drafter raise CheckpointError whose message names
    the key / shape / value at fault (the engines would load these silently)."""
    edit, patterns = WEIGHT_FAULTS[fault]
    path = _edit_weights(_good(tmp_path, drafter), edit)
    with pytest.raises(CheckpointError) as ei:
        load_drafter(path, target=target)
    msg = str(ei.value)
    assert str(path) in msg
    for pat in patterns:
        assert re.search(pat, msg), f"{pat!r} not in:\n{msg}"


def test_fc_width_disagrees_with_config_target_hidden_size(tmp_path, drafter, target):
    """Changing the config's target_hidden_size (32 -> 16) makes n_aux*Ht = 48 disagree with the
    stored fc width 96: refused with the n_aux x Ht arithmetic in the message."""
    path = _edit_config(_good(tmp_path, drafter), lambda c: c.__setitem__("target_hidden_size", 16))
    with pytest.raises(CheckpointError, match=r"fc\.weight input width 96 != .*3 x 16 = 48"):
        load_drafter(path, target=target)


def test_target_with_other_vocab_is_refused(tmp_path, drafter):
    """A target whose vocabulary differs from the drafter's (and so whose embedding cannot serve
    as embed_tokens) is refused, naming both vocab sizes."""
    path = _good(tmp_path, drafter)
    other = tiny_llama(vocab=100)
    with pytest.raises(CheckpointError, match=r"target vocab_size 100 != drafter vocab_size 128"):
        load_drafter(path, target=other)


def test_stored_embed_tokens_with_wrong_vocab_is_refused(tmp_path, drafter):
    """A speculators checkpoint whose own embed_tokens has the wrong vocabulary (100 rows for a
    128-token target) is refused naming embed_tokens.weight and both shapes."""
    path = _edit_weights(_good(tmp_path, drafter, "speculators"),
                         lambda s: s.__setitem__("embed_tokens.weight", s["embed_tokens.weight"][:100]))
    with pytest.raises(CheckpointError, match=r"embed_tokens\.weight has shape \(100, 32\).*\(128, 32\)"):
        load_drafter(path)


def test_truncated_safetensors_is_refused(tmp_path, drafter, target):
    """A safetensors file cut in half is reported as corrupt/truncated, naming the file."""
    f = _good(tmp_path, drafter) / "model.safetensors"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors: corrupt or truncated"):
        load_drafter(f.parent, target=target)


def test_corrupt_bin_is_refused(tmp_path, drafter, target):
    """A pytorch_model.bin of garbage bytes is a CheckpointError naming the file."""
    path = save_drafter(drafter, tmp_path / "a", "eagle", weights="bin")
    (path / "pytorch_model.bin").write_bytes(b"\x80\x02not a torch file" * 10)
    with pytest.raises(CheckpointError, match=r"pytorch_model\.bin"):
        load_drafter(path, target=target)


def _no_hidden_size(tmp_path, drafter):
    return _edit_config(_good(tmp_path, drafter), lambda c: c.pop("hidden_size"))


def test_config_missing_required_field_is_refused(tmp_path, drafter, target):
    """A config.json without hidden_size is a CheckpointError naming config.json and the field."""
    with pytest.raises(CheckpointError, match=r"config\.json.*missing required field.*hidden_size"):
        load_drafter(_no_hidden_size(tmp_path, drafter), target=target)


def test_cli_inspect_json_reports_config_fault(tmp_path, drafter, capsys):
    """`eagle-nb inspect PATH --json` on a config missing hidden_size still prints JSON on stdout
    with ok=false and the fault under problems, and exits non-zero."""
    from eagle_nb.cli import main as cli
    with pytest.raises(SystemExit) as ei:
        cli.main(["inspect", str(_no_hidden_size(tmp_path, drafter)), "--json"])
    assert ei.value.code != 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and any("hidden_size" in p for p in out["problems"])


def test_unknown_key_inside_midlayer_is_reported_unexpected(tmp_path, drafter, target):
    """An extra key under the layer prefix (e.g. Qwen3 drafts' `midlayer.self_attn.q_norm.weight`)
    is reported as unexpected by inspect_checkpoint and refused by load_drafter with CheckpointError."""
    path = _edit_weights(_good(tmp_path, drafter),
                         lambda s: s.__setitem__("midlayer.self_attn.q_norm.weight", torch.ones(8)))
    rep, _ = inspect_checkpoint(path)
    assert "midlayer.self_attn.q_norm.weight" in rep.unexpected and not rep.ok
    with pytest.raises(CheckpointError, match=r"q_norm"):
        load_drafter(path, target=target)


def test_invalid_json_config_is_refused(tmp_path, drafter, target):
    """An unparsable config.json is a CheckpointError naming the file and saying invalid JSON."""
    path = _good(tmp_path, drafter)
    (path / "config.json").write_text('{"hidden_size": 32,')
    with pytest.raises(CheckpointError, match=r"config\.json: invalid JSON"):
        load_drafter(path, target=target)


def test_no_weights_file_is_refused(tmp_path, drafter, target):
    """A directory with a config but no weights file names the files it looked for."""
    path = _good(tmp_path, drafter)
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"no weights file.*model\.safetensors.*pytorch_model\.bin"):
        load_drafter(path, target=target)


def test_all_zero_d2t_with_smaller_draft_vocab_is_a_warning(tmp_path, drafter, target):
    """An all-zero d2t (identity onto the first Vd ids) with Vd < V is legal but suspicious: the
    report carries a warning and a 'suspicious' verdict, no problem, and loading still works."""
    def zero(s):
        s["d2t"] = torch.zeros_like(s["d2t"])
        s["t2d"] = torch.zeros_like(s["t2d"])
        s["t2d"][: s["d2t"].numel()] = True
    path = _edit_weights(_good(tmp_path, drafter), zero)
    rep, _ = inspect_checkpoint(path)
    assert rep.ok and rep.problems == []
    assert any("all zeros" in w for w in rep.warnings), rep.warnings
    assert "suspicious" in rep.d2t_verdict
    good_rep, _ = inspect_checkpoint(_good(tmp_path, drafter, "sglang"))
    assert good_rep.warnings == [] and good_rep.d2t_verdict == "offsets (ok)"
    load_drafter(path, target=target)


# -- engine-style ablation ------------------------------------------------------------------------
def test_engine_style_load_drops_speculators_names(tmp_path, drafter, target, inputs):
    """load_drafter_engine_style (the SGLang-like ablation) on a speculators checkpoint drops every
    `layers.0.*` key, leaves every midlayer parameter at random init, raises nothing, and gives
    logits different from the strict load."""
    path = _good(tmp_path, drafter, "speculators")
    eng, info = load_drafter_engine_style(path, target)
    layer_keys = {k for k in load_file(str(path / "model.safetensors")) if k.startswith("layers.0.")}
    assert layer_keys and layer_keys <= set(info["dropped"])
    mid = {k for k in drafter.state_dict() if k.startswith("midlayer.")}
    assert mid <= set(info["left_random"])
    assert "fc.weight" not in info["left_random"] and "lm_head.weight" not in info["left_random"]
    strict = load_drafter(path)
    assert not torch.allclose(_logits(eng, inputs), _logits(strict, inputs), atol=1e-3)
    torch.testing.assert_close(_logits(strict, inputs), _logits(drafter, inputs))


@pytest.mark.parametrize("version,dropped", [("0.5.11", True), ("0.5.12", False), ("0.5.14", False)])
def test_engine_style_layers0_keys_by_sglang_version(tmp_path, drafter, target, inputs, version, dropped):
    """SGLang renamed its draft module to `layers` (midlayer -> layers.0) in 0.5.12: from then on
    a `layers.0.*` checkpoint loads completely there; before, its decoder layer stayed random. A
    `midlayer.*` (format B) checkpoint loads in every version."""
    spec = _good(tmp_path, drafter, "speculators")
    eng, info = load_drafter_engine_style(spec, target, sglang_version=version)
    assert bool(info["left_random"]) == dropped
    if not dropped:
        torch.testing.assert_close(_logits(eng, inputs), _logits(drafter, inputs))
    b = save_drafter(drafter, tmp_path / "b", "sglang")
    assert load_drafter_engine_style(b, target, sglang_version=version)[1]["left_random"] == []


# -- CLI ------------------------------------------------------------------------------------------
def _cli(*args):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "eagle_nb", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_inspect_json(tmp_path, drafter):
    """`eagle-nb inspect PATH --json` exits 0 on a good checkpoint with the documented keys, and
    non-zero on a bad one with the fault listed under problems."""
    good = _good(tmp_path, drafter, "sglang")
    r = _cli("inspect", good, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for k in ("format", "aux_layer_ids_hf", "d2t_verdict", "missing", "unexpected", "problems"):
        assert k in out, k
    assert out["format"] == "sglang" and out["aux_layer_ids_hf"] == AUX_HF
    assert out["d2t_verdict"] == "offsets (ok)" and out["problems"] == []
    bad = _edit_weights(_good(tmp_path, drafter, "eagle"), lambda s: s.pop("midlayer.mlp.up_proj.weight"))
    r = _cli("inspect", bad, "--json")
    assert r.returncode != 0
    out = json.loads(r.stdout)
    assert out["missing"] == ["midlayer.mlp.up_proj.weight"]
    assert any("midlayer.mlp.up_proj.weight" in p for p in out["problems"])


def test_cli_convert_to_speculators(tmp_path, drafter, inputs):
    """`eagle-nb convert SRC DST --to speculators` on an SGLang checkpoint that ships its own
    embed_tokens writes a speculators checkpoint that loads (no target) to the same logits."""
    src = _edit_weights(_good(tmp_path, drafter, "sglang"),
                        lambda s: s.__setitem__("embed_tokens.weight", drafter.embed_tokens.weight.detach()))
    dst = tmp_path / "out"
    r = _cli("convert", src, dst, "--to", "speculators")
    assert r.returncode == 0, r.stderr
    assert detect_format(read_config(dst)) == "speculators"
    assert read_config(dst)["eagle_aux_hidden_state_layer_ids"] == AUX_HF
    _assert_same(drafter, load_drafter(dst), inputs)


# -- dtype of the written file ----------------------------------------------------------------------
@pytest.mark.parametrize("field", ["dtype", "torch_dtype"])
def test_convert_keeps_the_declared_dtype_either_field(tmp_path, drafter, target, field):
    """convert writes in the source's dtype, read from transformers-5 `dtype` as well as
    `torch_dtype`: a bf16 format-B file stays bf16 (weights and label)."""
    src = save_drafter(drafter, tmp_path / "b", "sglang", dtype=torch.bfloat16)
    cfg = read_config(src)
    cfg.pop("torch_dtype")
    cfg[field] = "bfloat16"
    (src / "config.json").write_text(json.dumps(cfg))
    out = convert(src, tmp_path / "c", "speculators", target=target)
    assert read_config(out)["torch_dtype"] == "bfloat16"
    assert load_file(str(out / "model.safetensors"))["fc.weight"].dtype == torch.bfloat16


@pytest.mark.parametrize("value", ["int8", "float64", "auto", 7])
def test_convert_refuses_a_dtype_the_formats_do_not_use(tmp_path, drafter, target, value):
    """Only float32 / float16 / bfloat16: anything else is an error naming the field and value,
    for the config field and for the dtype argument alike."""
    src = save_drafter(drafter, tmp_path / "b", "sglang")
    cfg = read_config(src)
    cfg["dtype"] = value
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=rf"field 'dtype' = {re.escape(repr(value))}"):
        convert(src, tmp_path / "c", "speculators", target=target)
    good = save_drafter(drafter, tmp_path / "ok", "speculators")
    with pytest.raises(CheckpointError, match="dtype argument = torch.int8"):
        convert(good, tmp_path / "d", "sglang", dtype=torch.int8)


# -- extras trainers leave behind -------------------------------------------------------------------
def test_known_harmless_extras_load_with_a_warning_unknown_ones_fail(tmp_path, drafter, target, inputs):
    """Frozen-target buffers (`target_model.*`, as EAGLE's DeepSpeed save leaves them) and optimizer
    leftovers load with a CheckpointWarning naming each key; an unknown key under the drafter's
    own prefix (`midlayer.`) is still refused."""
    from eagle_nb.checkpoints.detect import CheckpointWarning
    path = save_drafter(drafter, tmp_path / "a", "eagle", weights="bin")
    state = torch.load(path / "pytorch_model.bin", weights_only=True)
    extra = {"target_model.model.layers.3.self_attn.rotary_emb.inv_freq": torch.ones(4),
             "optimizer.state.0.exp_avg": torch.zeros(2)}
    torch.save({**state, **extra}, path / "pytorch_model.bin")
    with pytest.warns(CheckpointWarning) as rec:
        loaded = load_drafter(path, target=target)
    text = " ".join(str(w.message) for w in rec)
    assert all(k in text for k in extra)
    _assert_same(drafter, loaded, inputs)
    rep, _ = inspect_checkpoint(path, None)
    assert rep.ok and sorted(rep.notes["ignored_extras"]) == sorted(extra)
    torch.save({**state, "midlayer.self_attn.bogus.weight": torch.ones(2)}, path / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match=r"unexpected keys \['midlayer.self_attn.bogus.weight'\]"):
        load_drafter(path, target=target)
