"""Tests for eagle_nb.model.capture: hook capture equals `output_hidden_states` on every stock layout.

Every target is a tiny random config built offline (`ARCHS` in tests/helpers.py: hidden 32,
7 decoder layers, vocab 128), seeded, CPU only. 7 is the smallest depth for which the EAGLE-3
defaults (2, L//2, L-3) are distinct: L=6 gives (2, 3, 3), which `eagle3_layers` rightly rejects.
"""
from __future__ import annotations

import re

import pytest
import torch
import transformers as tf
from torch import nn

from eagle_nb.model.capture import capture
from eagle_nb.model.decoder import engine_style_layers, find_decoder_layers
from eagle_nb.model.layers import CONVENTIONS, eagle3_layers, from_hf, sglang_capture_ids, to_hf
from helpers import (ARCH_LAYERS, ARCHS, H, V, build_arch, hook_count, text_config, text_ids,
                     tiny_llama)

L = ARCH_LAYERS          # decoder layers of every tiny target (tests/helpers.py)


def _attr(obj, path: str):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _tiny_llama(num_layers: int = L) -> nn.Module:
    torch.manual_seed(0)
    return tf.LlamaForCausalLM(tf.LlamaConfig(**text_config(num_hidden_layers=num_layers))).eval()


# ---------------------------------------------------------------- equality with output_hidden_states

@pytest.mark.parametrize("name", list(ARCHS))
def test_capture_matches_output_hidden_states(name):
    """On every stock architecture: states[k] == hidden_states[k] for k < L; final_norm(states[L])
    == hidden_states[L] while states[L] != hidden_states[L] (it is pre-norm); the eagle3 fused
    width is 3H; and no hook is left behind."""
    _, cls_name, layers_path, norm_path = ARCHS[name]
    model = build_arch(name)
    assert type(model).__name__ == cls_name
    path, layers = find_decoder_layers(model)
    assert (path, len(layers)) == (layers_path, L)
    ids = text_ids(model)
    # NOTE: transformers 5 installs its own output-capturing hooks lazily, on the first forward
    # with output_hidden_states=True; warm up so `before` already counts them.
    with torch.no_grad():
        model(input_ids=ids, output_hidden_states=True)
    before = hook_count(model)

    with torch.no_grad(), capture(model, range(L + 1)) as every, \
            capture(model, eagle3_layers(L)) as e3:
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states

    assert hook_count(model) == before
    assert len(hidden) == L + 1
    for k in range(L):
        assert every[k].shape == (2, ids.shape[1], H)
        assert torch.allclose(every[k], hidden[k], rtol=0, atol=1e-6), f"layer {k}"
    final_norm = _attr(model, norm_path)
    with torch.no_grad():
        assert torch.allclose(final_norm(every[L]), hidden[L], rtol=0, atol=1e-5)
    assert not torch.allclose(every[L], hidden[L], atol=1e-3)
    assert e3.fused(expected_width=3 * H).shape == (2, ids.shape[1], 3 * H)


# ---------------------------------------------------------------- multimodal wrapper

def test_wrapper_capture_equals_plain_model():
    """make_wrapper(plain) nests the same weights under model.language_model: capture of [2,4,5,8]
    and logits are equal to the plain model's, and engine-style layer lookup (model.layers only)
    finds nothing on the wrapper but finds the plain model's layers."""
    from eagle_nb.model.targets import make_wrapper
    plain = _tiny_llama(num_layers=8)
    wrapper = make_wrapper(plain)
    assert type(wrapper).__name__ == "LlavaForConditionalGeneration"
    ids = text_ids(plain)
    assert wrapper.config.image_token_index not in ids.flatten().tolist()
    with torch.no_grad():
        with capture(plain, [2, 4, 5, 8]) as sp:
            logits_p = plain(input_ids=ids).logits
        with capture(wrapper, [2, 4, 5, 8]) as sw:
            logits_w = wrapper(input_ids=ids).logits
    assert sw.layers_path == "model.language_model.layers"
    for k in [2, 4, 5, 8]:
        assert torch.allclose(sp[k], sw[k], rtol=0, atol=1e-6), f"layer {k}"
    assert torch.allclose(sp.fused(), sw.fused(), rtol=0, atol=1e-6)
    assert torch.allclose(logits_p, logits_w, rtol=0, atol=1e-5)
    assert engine_style_layers(wrapper) is None
    assert engine_style_layers(plain) is plain.model.layers


def test_a_wrappers_target_pass_is_its_plain_models_bit_for_bit():
    """What lets the one pass serve the wrapper from the plain model's pass (`text_twin`): greedy
    continuations, every layer's states and the final state from the wrapper equal the plain
    model's exactly, on the code pair's target; `text_twin` maps the wrapper to the plain model
    and any other model to itself."""
    from eagle_nb.io.paths import CODE
    from eagle_nb.loop import target_states as TS
    from eagle_nb.model.targets import load_target, make_wrapper, text_twin
    plain, tok = load_target(CODE.target, device="cpu")
    wrapper = make_wrapper(plain)
    assert text_twin(wrapper) is plain and text_twin(plain) is plain
    ids = [tok(p, return_tensors="pt")["input_ids"] for p in ("def add(a, b):", "for i in range(")]
    a, b = TS.from_target(plain, ids, 24, layer_ids=[2, 4]), TS.from_target(wrapper, ids, 24, layer_ids=[2, 4])
    assert all(torch.equal(x, y) for x, y in zip(a.ids, b.ids))
    for k in (2, 4, TS.FINAL):
        assert all(torch.equal(x, y) for x, y in zip(a.states[k], b.states[k])), k


# ---------------------------------------------------------------- hook lifetime

def test_hooks_removed_after_normal_exit():
    """After a normal exit the model carries exactly the hooks it had before (stock transformers-5
    models carry some of their own, so the comparison is before vs after, not against 0)."""
    model = _tiny_llama()
    before = hook_count(model)
    with capture(model, eagle3_layers(L)):
        assert hook_count(model) == before + 3 + 1      # + the empty-input check on layer 0
        with torch.no_grad():
            model(input_ids=text_ids(model))
    assert hook_count(model) == before


def test_hooks_removed_after_exception():
    """An exception raised inside the block propagates unchanged and still removes every hook."""
    model = _tiny_llama()
    before = hook_count(model)
    with pytest.raises(RuntimeError, match="boom"):
        with capture(model, [0, 3, L]):
            assert hook_count(model) == before + 3 + 1
            raise RuntimeError("boom")
    assert hook_count(model) == before


# ---------------------------------------------------------------- errors

def test_an_empty_input_is_refused_by_name():
    """A forward over zero tokens inside the block raises a ValueError that says the input is
    empty (not torch's 'cannot reshape tensor of 0 elements' from inside the first attention),
    and every hook is still removed."""
    model = _tiny_llama()
    before = hook_count(model)
    with pytest.raises(ValueError, match=r"capture: LlamaForCausalLM was run on an empty input "
                                         r"\(hidden states \(1, 0, 32\) .*at least one token"):
        with capture(model, eagle3_layers(L)), torch.no_grad():
            model(input_ids=torch.zeros(1, 0, dtype=torch.long))
    assert hook_count(model) == before


@pytest.mark.parametrize("bad", [[L + 1], [-1], [0, 2, L + 5]])
def test_out_of_range_id_raises(bad):
    """Ids outside 0..L raise ValueError naming the valid range, before any hook is registered."""
    model = _tiny_llama()
    before = hook_count(model)
    with pytest.raises(ValueError, match=rf"out of range.*0\.\.{L}"):
        with capture(model, bad):
            pass
    assert hook_count(model) == before


def test_duplicate_ids_raise():
    """Duplicate ids raise ValueError instead of silently fusing one layer twice."""
    with pytest.raises(ValueError, match="duplicate"):
        with capture(_tiny_llama(), [2, 3, 3]):
            pass


def test_unresolvable_model_names_class_and_lists():
    """A model with no layer list raises ValueError naming its class and asking for layers_path."""
    class NoLayers(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

    with pytest.raises(ValueError) as err:
        with capture(NoLayers(), [0]):
            pass
    msg = str(err.value)
    assert "NoLayers" in msg and "layers_path" in msg and "no ModuleList fits" in msg


# ---------------------------------------------------------------- toy decoder (no transformers)

class ToyLayer(nn.Module):
    """h -> h + tanh(W h). Old transformers layers returned `(hidden, attn_weights)` tuples."""

    def __init__(self, returns_tuple: bool):
        super().__init__()
        self.proj = nn.Linear(H, H)
        self.returns_tuple = returns_tuple

    def forward(self, hidden_states):
        out = hidden_states + torch.tanh(self.proj(hidden_states))
        return (out, None) if self.returns_tuple else out


class ToyDecoder(nn.Module):
    """Embedding -> layers -> final norm; forward also returns the reference residual stream
    (inputs of every layer plus the last output, pre-norm). Layers sit at `where`."""

    def __init__(self, n_layers=4, returns_tuple=False, call_kwargs=False, where="model.layers"):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(V, H)
        self.norm = nn.LayerNorm(H)
        self.call_kwargs = call_kwargs
        self.where = where
        parent_name, attr = where.rsplit(".", 1)
        parent = nn.Module()
        setattr(parent, attr, nn.ModuleList(ToyLayer(returns_tuple) for _ in range(n_layers)))
        setattr(self, parent_name, parent)

    def forward(self, input_ids):
        h = self.embed(input_ids)
        stream = [h]
        for layer in _attr(self, self.where):
            out = layer(hidden_states=h) if self.call_kwargs else layer(h)
            h = out[0] if isinstance(out, tuple) else out
            stream.append(h)
        return self.norm(h), stream


@pytest.mark.parametrize("returns_tuple,call_kwargs", [(True, False), (False, False), (True, True)])
def test_tuple_and_tensor_layer_outputs(returns_tuple, call_kwargs):
    """Whether a layer returns `(hidden, None)` or a bare tensor (and whether it is called with
    hidden_states positionally or by keyword), capture records the full (B, T, H) hidden tensor,
    never batch row 0 of a tensor output."""
    model = ToyDecoder(n_layers=4, returns_tuple=returns_tuple, call_kwargs=call_kwargs)
    ids = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), capture(model, range(5)) as states:
        _, stream = model(ids)
    assert not torch.allclose(stream[4][0], stream[4][1])  # rows differ: row 0 would be detectable
    for k in range(5):
        assert states[k].shape == (2, 5, H)
        assert torch.equal(states[k], stream[k]), f"layer {k}"


def test_explicit_layers_path_for_nonstandard_layout():
    """A config-less model with two equally plausible layer lists is rejected by the search with
    an error naming both, and captured correctly when `layers_path=` names one."""
    model = ToyDecoder(n_layers=4, where="backbone.blocks")
    model.heads = nn.Module()
    model.heads.experts = nn.ModuleList(nn.Linear(H, H) for _ in range(4))
    with pytest.raises(ValueError, match=r"backbone\.blocks.*heads\.experts"):
        find_decoder_layers(model)
    with pytest.raises(ValueError, match="layers_path='backbone.nope'"):
        find_decoder_layers(model, "backbone.nope")
    ids = torch.randint(0, V, (2, 5), generator=torch.Generator().manual_seed(1))
    with torch.no_grad(), capture(model, [1, 4], layers_path="backbone.blocks") as states:
        _, stream = model(ids)
    assert states.layers_path == "backbone.blocks"
    assert torch.equal(states[1], stream[1]) and torch.equal(states[4], stream[4])


def test_fused_wrong_expected_width_names_both():
    """fused(expected_width=wrong) raises ValueError naming the actual and the expected width."""
    model = _tiny_llama()
    with torch.no_grad(), capture(model, eagle3_layers(L)) as states:
        model(input_ids=text_ids(model))
    assert states.fused(expected_width=3 * H).shape[-1] == 3 * H
    with pytest.raises(ValueError) as err:
        states.fused(expected_width=2 * H)
    assert re.search(rf"\b{3 * H}\b", str(err.value)) and re.search(rf"\b{2 * H}\b", str(err.value))


def test_fused_is_in_ascending_layer_order():
    """Ids given out of order are fused low -> high (the order EAGLE-3's fc was trained on)."""
    model = _tiny_llama()
    with torch.no_grad(), capture(model, [4, L, 2]) as states:
        model(input_ids=text_ids(model))
    assert states.layer_ids == [2, 4, L]
    assert torch.equal(states.fused(), torch.cat([states[2], states[4], states[L]], dim=-1))


def test_fused_without_forward_raises():
    """Requesting ids but running no forward inside the block: fused() and states[k] raise instead
    of returning fewer states."""
    with capture(_tiny_llama(), eagle3_layers(L)) as states:
        pass
    with pytest.raises(ValueError, match="never captured"):
        states.fused()
    with pytest.raises(KeyError):
        states[2]


# ---------------------------------------------------------------- layer-id conventions

def test_conventions():
    """SpecForge ids are layer outputs (+1 to HF); every convention round-trips; EAGLE-3 defaults
    for 32 layers are (2, 16, 29); and unknown conventions raise."""
    assert to_hf([1, 15, 28], "specforge") == [2, 16, 29]
    for convention in CONVENTIONS:
        for ids in ([0, 1, 2], [2, 16, 29], [31]):
            assert from_hf(to_hf(ids, convention), convention) == ids
    assert eagle3_layers(32) == (2, 16, 29)
    with pytest.raises(ValueError, match="not distinct"):
        eagle3_layers(6)
    with pytest.raises(ValueError, match="unknown layer-id convention"):
        to_hf([1], "medusa")
    with pytest.raises(ValueError, match="unknown layer-id convention"):
        from_hf([1], "medusa")


def test_sglang_capture_ids_per_architecture_and_version():
    """SGLang's llama.py (and qwen*.py) always add 1 to nested ids, in every release; the DeepSeek-V2
    / GLM-4-MoE-lite family adds 1 only when the first id is 1, from 0.5.13 on (read in the
    0.5.9-0.5.23 wheels)."""
    for version in ("0.5.9", "0.5.14", "0.5.23"):
        assert sglang_capture_ids([1, 29, 57], "LlamaForCausalLM", version) == [2, 30, 58]
        assert sglang_capture_ids([2, 30, 58], "LlamaForCausalLM", version) == [3, 31, 59]
        assert sglang_capture_ids([2, 30, 58], "Qwen3ForCausalLM", version) == [3, 31, 59]
    assert sglang_capture_ids([2, 30, 58]) == [3, 31, 59]            # default: llama, current
    for arch in ("DeepseekV3ForCausalLM", "Glm4MoeLiteForCausalLM", "KimiK25ForConditionalGeneration"):
        assert sglang_capture_ids([1, 29, 57], arch, "0.5.14") == [2, 30, 58]
        assert sglang_capture_ids([2, 30, 58], arch, "0.5.14") == [2, 30, 58]
        assert sglang_capture_ids([2, 30, 58], arch, "0.5.12") == [3, 31, 59]
    with pytest.raises(ValueError, match="cannot read SGLang version"):
        sglang_capture_ids([1], "LlamaForCausalLM", "latest")


# ---------------------------------------------------------------- dtype / device / detach / history

def test_dtype_device_and_detach():
    """dtype=float16 / device='cpu' yields fp16 CPU copies of the states, and states are detached
    even when the forward builds a graph."""
    model = _tiny_llama()
    ids = text_ids(model)
    with capture(model, eagle3_layers(L), dtype=torch.float16, device="cpu") as states:
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
    assert hidden[2].requires_grad  # the forward did build a graph
    for k in eagle3_layers(L):
        assert states[k].dtype == torch.float16 and states[k].device.type == "cpu"
        assert not states[k].requires_grad
        assert torch.equal(states[k], hidden[k].detach().half())
    assert states.fused().dtype == torch.float16


def test_last_forward_wins_and_history():
    """Each forward overwrites states[k]; keep_history=True keeps every forward's states in order."""
    model = _tiny_llama()
    a, b = text_ids(model, seq=4), text_ids(model, seq=6)
    with torch.no_grad(), capture(model, [0, L], keep_history=True) as states:
        model(input_ids=a)
        model(input_ids=b)
    assert states[0].shape[1] == 6
    assert [x.shape[1] for x in states.history[L]] == [4, 6]


# ---------------------------------------------------------------- table

def test_table():
    """table() has one row per captured layer plus a 'fused' row, with shape and norm statistics."""
    model = _tiny_llama()
    ids = text_ids(model)
    with torch.no_grad(), capture(model, [*eagle3_layers(L), L]) as states:
        model(input_ids=ids)
    df = states.table()
    assert len(df) == 4 + 1
    assert {"mean_norm", "max_norm", "frac_nonfinite", "shape"} <= set(df.columns)
    assert list(df["name"]) == ["layers.2.input", "layers.3.input", "layers.4.input",
                                f"layers.{L - 1}.output", "fused"]
    assert df["shape"].iloc[-1] == (2, ids.shape[1], 4 * H)
    assert df["shape"].iloc[0] == (2, ids.shape[1], H)
    assert (df["frac_nonfinite"] == 0).all()
    assert df["mean_norm"].iloc[0] == pytest.approx(float(states[2].norm(dim=-1).mean()))
    assert (df["max_norm"] >= df["mean_norm"]).all()


def test_state_table_layer_ids_stay_integers():
    """The id columns hold ints (never 2.0 or NaN); the fused row, which has no id, shows a dash."""
    model = tiny_llama(num_layers=4)
    with torch.no_grad(), capture(model, [1, 2, 4]) as states:
        model(input_ids=torch.tensor([[1, 2, 3]]))
    df = states.table()
    for col in ("id_hf", "id_sglang-config"):
        assert [type(v) for v in df[col][:3]] == [int, int, int] and df[col].iloc[3] == "—"
    assert list(df["id_sglang-config"][:3]) == [0, 1, 3]
    assert "nan" not in df.to_string().lower() and ".0 " not in df.to_string()
