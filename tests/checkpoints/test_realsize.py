"""Drafters with the configs, key names and file kinds of real public EAGLE-3 drafters (weights
random, shapes divided by 64: eagle_nb/checkpoints/real_shaped.py), beside targets with real configs and
only an embedding and a head: each inspects clean, loads in its own dtype without copying, drafts,
and converts losslessly wherever the destination can express it. Plus the config variants seen in
those files (aux ids at the top level, an id equal to the layer count, draft vocabulary == full
vocabulary, CRLF text) and the peak memory of inspect / load / convert at a quarter of Kimi-K2.5."""
from __future__ import annotations

import json

import pytest
import torch

from eagle_nb.checkpoints.convert import convert
from eagle_nb.checkpoints.inspect import inspect_checkpoint
from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.checkpoints.real_shaped import CASES, build
from eagle_nb.io.peak_memory import peak_rss_mib
from eagle_nb.io.lazy_weights import open_weights
from eagle_nb.io.target_parts import read_text_config
from eagle_nb.io.weight_files import CheckpointError

SCALE = 1 / 64
# destination format -> None (lossless) or a phrase of the refusal
CONVERSIONS = {
    "llama-3.1-8b": {"eagle": None, "sglang": None, "speculators": None},
    "kimi-k2.5": {"sglang": None, "speculators": None},
    "kimi-k2": {"sglang": None, "speculators": None},
    "qwen3-235b": {"eagle": "num_aux=4", "sglang": "sliding_window=2048", "speculators": None},
    "gpt-oss-20b": {"eagle": r"head_dim=2 != hidden_size/num_attention_heads", "sglang": None,
                  "speculators": None},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("realsize")
    return {c: build(c, root / c, SCALE) for c in CASES}


def draft(d, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    c = d.config
    x = torch.randn(1, 6, c.fc_in_features, generator=g).to(d.fc.weight.dtype)
    ids = torch.randint(0, c.vocab_size, (1, 6), generator=g)
    return d.step(ids, d.fuse(x))[0]


@pytest.mark.parametrize("case", list(CASES))
def test_real_configs_inspect_load_in_their_dtype_and_draft(built, case):
    """No problem reported; the weights stay bf16 and memory-mapped (storages not resizable:
    nothing was copied), the target's embedding too; one draft step gives finite logits."""
    D, T = built[case]
    rep, _ = inspect_checkpoint(D, read_text_config(T))
    assert rep.ok and not rep.problems and not rep.warnings, (rep.problems, rep.warnings)
    d = load_drafter(D, target=T)
    assert d.fc.weight.dtype == d.embed_tokens.weight.dtype == torch.bfloat16
    assert not d.fc.weight.untyped_storage().resizable()
    assert not d.embed_tokens.weight.untyped_storage().resizable()
    logits = draft(d)
    assert logits.shape == (1, 6, d.config.draft_vocab_size) and torch.isfinite(logits).all()


def test_what_the_real_configs_declare(built):
    """Kimi: SGLang-config ids [2, 30, 58] are HF [3, 31, 59], model_type kimi_k2 accepted;
    Qwen3-235B: four ids, the last equal to the target's 94 layers, a 2048-token window;
    gpt-oss: attention width 64 x 2 != hidden 64; SafeAILab: ids implied by the target."""
    cfg = {c: load_drafter(*built[c]).config for c in CASES}
    assert cfg["kimi-k2.5"].aux_layer_ids == cfg["kimi-k2"].aux_layer_ids == [3, 31, 59]
    assert cfg["qwen3-235b"].aux_layer_ids == [1, 46, 90, 94] and cfg["qwen3-235b"].sliding_window == 2048
    assert read_text_config(built["qwen3-235b"][1]).num_hidden_layers == 94
    g = cfg["gpt-oss-20b"]
    assert g.head_dim * g.num_attention_heads != g.hidden_size
    rep, _ = inspect_checkpoint(built["llama-3.1-8b"][0], read_text_config(built["llama-3.1-8b"][1]))
    assert rep.notes["aux_layer_ids_implied"] == [2, 16, 29] and rep.notes["weights_file"] == "pytorch_model.bin"


@pytest.mark.parametrize("case,to", [(c, f) for c, fs in CONVERSIONS.items() for f in fs])
def test_real_configs_convert_losslessly_or_are_refused(built, tmp_path, case, to):
    """Every conversion the destination can express gives the same drafter (bit-identical
    logits when the dtype is kept); the others are refused naming the feature, writing nothing."""
    D, T = built[case]
    want = CONVERSIONS[case][to]
    if want is not None:
        with pytest.raises(CheckpointError, match=want):
            convert(D, tmp_path / "out", to, target=T)
        assert not (tmp_path / "out").exists()
        return
    out = convert(D, tmp_path / "out", to, target=T)
    rep, _ = inspect_checkpoint(out, read_text_config(T))
    assert rep.ok and rep.format == to
    a, b = load_drafter(D, target=T), load_drafter(out, target=T)
    assert b.config.aux_layer_ids == a.config.aux_layer_ids
    if b.fc.weight.dtype == a.fc.weight.dtype:
        assert torch.equal(draft(a), draft(b))
    else:   # SafeAILab's config declares float16 for these bf16 weights: written as declared
        assert b.fc.weight.dtype == torch.float16 and case == "llama-3.1-8b"
        torch.testing.assert_close(draft(a).float(), draft(b).float(), rtol=0.02, atol=0.02)


def test_crlf_config_text_reads_as_lf(tmp_path):
    lf = build("kimi-k2", tmp_path / "lf", SCALE)[0]
    crlf = build("kimi-k2", tmp_path / "crlf", SCALE, crlf=True)[0]
    assert b"\r\n" in (crlf / "config.json").read_bytes()
    assert inspect_checkpoint(crlf)[0].config == inspect_checkpoint(lf)[0].config


def test_format_b_ids_at_the_top_level_are_vllm_ids(tmp_path):
    """A LlamaForCausalLMEagle3 config with ids only at the top level (vLLM's field, HF ids) uses
    them; with both fields naming different layers, inspect warns naming both."""
    def top_only(c):
        c["eagle_aux_hidden_state_layer_ids"] = c.pop("eagle_config")["eagle_aux_hidden_state_layer_ids"]

    def both(c):
        c["eagle_aux_hidden_state_layer_ids"] = [2, 30, 58]
    d = build("kimi-k2.5", tmp_path / "top", SCALE, drafter_edit=top_only)[0]
    assert inspect_checkpoint(d)[0].config.aux_layer_ids == [2, 30, 58]
    d = build("kimi-k2.5", tmp_path / "both", SCALE, drafter_edit=both)[0]
    rep, _ = inspect_checkpoint(d)
    assert rep.config.aux_layer_ids == [3, 31, 59]
    assert any("[2, 30, 58]" in w and "name different layers" in w for w in rep.warnings)


def test_draft_vocabulary_equal_to_the_full_vocabulary(tmp_path):
    """No d2t/t2d in the file: the identity, loaded and converted both ways."""
    def full(c):
        c["draft_vocab_size"] = c["vocab_size"]
    D, T = build("gpt-oss-20b", tmp_path / "src", SCALE, drafter_edit=full)
    assert not {"d2t", "t2d"} & set(open_weights(D))
    rep, _ = inspect_checkpoint(D)
    assert rep.ok and rep.d2t_verdict.startswith("absent (identity")
    a = load_drafter(D, target=T)
    assert not a.d2t.any() and a.t2d.all()
    c = convert(D, tmp_path / "c", "speculators", target=T)
    b = convert(c, tmp_path / "b", "sglang", drop_embed=True)
    assert torch.equal(draft(a), draft(load_drafter(b, target=T)))


def test_an_id_equal_to_the_layer_count_captures_the_last_layer_output():
    """HF id L (= SGLang-config id L-1, as Qwen3-235B's 94 of 94) is the last decoder layer's
    output before the final norm."""
    from helpers import tiny_llama

    from eagle_nb.model.capture import capture
    model = tiny_llama(num_layers=4)
    ids = torch.tensor([[1, 5, 9, 3]])
    out = {}
    h = model.model.layers[-1].register_forward_hook(lambda m, i, o: out.setdefault("x", o[0] if isinstance(o, tuple) else o))
    with capture(model, [2, 4]) as states:
        model(ids)
    h.remove()
    assert torch.equal(states[4], out["x"])


def test_quarter_kimi_memory_stays_bounded(tmp_path):
    """At a quarter of Kimi-K2.5 (a 142 MiB drafter, a 140 MiB embedding borrowed from the
    target) against the same commands at 1/64 (imports, the meta-device model, one chunk):
    inspect grows by nothing, convert (which stores the target's embedding) by less than its
    largest tensor (that 140 MiB embedding: the issue's bound is largest tensor + 1 GiB), load by
    at most the drafter's file."""
    def peaks(root, scale):
        D, T = build("kimi-k2.5", root, scale)
        return D, (peak_rss_mib(["-m", "eagle_nb", "inspect", str(D), "--target", str(T)]),
                   peak_rss_mib(["-m", "eagle_nb", "convert", str(D), str(root / "o"), "--to",
                                 "speculators", "--target", str(T)]),
                   peak_rss_mib(["-c", f"import eagle_nb; eagle_nb.load_drafter({str(D)!r}, target={str(T)!r})"]))
    _, small = peaks(tmp_path / "small", SCALE)
    D, big = peaks(tmp_path / "big", 0.25)
    size = sum(f.stat().st_size for f in D.iterdir()) / 2**20
    inspect, conv, load = (b - s for b, s in zip(big, small))
    assert inspect < 20 and conv < 140 and load < size + 40, (size, inspect, conv, load)
    assert json.loads((tmp_path / "big" / "o" / "config.json").read_text())["speculators_model_type"] == "eagle3"
