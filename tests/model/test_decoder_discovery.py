"""Decoder discovery that follows the model: architectures not listed anywhere in eagle_nb
(vision-language wrappers of several families, text models with other layouts) are found from
their own description (text config layer count, `get_decoder()`, the module tree), and the
captured states equal `output_hidden_states`.

Every model is a tiny random config built offline (hidden 32, 5 text layers, vocab 128), CPU only.
"""
from __future__ import annotations

import pytest
import torch
import transformers as tf
from torch import nn

from eagle_nb.model.capture import capture
from eagle_nb.model.decoder import find_decoder_layers, text_layer_count
from helpers import hook_count

H, V, L = 32, 128, 5
SPECIAL = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _text(**kw) -> dict:
    d = dict(vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=L,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **SPECIAL)
    d.update(kw)
    return d


def _siglip(**kw):
    d = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
             image_size=16, patch_size=8)
    d.update(kw)
    return tf.SiglipVisionConfig(**d)


def _qwen2_vl():
    text = _text(rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]})
    vision = dict(depth=L, embed_dim=16, hidden_size=H, num_heads=2, patch_size=4)  # vision depth == L
    return tf.Qwen2VLForConditionalGeneration(tf.Qwen2VLConfig(
        text_config=text, vision_config=vision, image_token_id=V - 1, video_token_id=V - 2,
        vision_start_token_id=V - 3, vision_end_token_id=V - 4))


def _mllama():
    text = tf.MllamaTextConfig(vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=L,
                               num_attention_heads=4, num_key_value_heads=2, cross_attention_layers=[2],
                               **SPECIAL)
    vision = tf.MllamaVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                   num_global_layers=1, attention_heads=2, image_size=16, patch_size=8,
                                   vision_output_dim=32, intermediate_layers_indices=[0])
    return tf.MllamaForConditionalGeneration(tf.MllamaConfig(vision_config=vision, text_config=text,
                                                             image_token_index=V - 1))


def _idefics3():
    return tf.Idefics3ForConditionalGeneration(tf.Idefics3Config(
        text_config=tf.LlamaConfig(**_text()), vision_config=tf.Idefics3VisionConfig(
            hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
            image_size=16, patch_size=8), image_token_id=V - 1, scale_factor=1))


def _paligemma():
    return tf.PaliGemmaForConditionalGeneration(tf.PaliGemmaConfig(
        text_config=tf.GemmaConfig(**_text(head_dim=8)), vision_config=_siglip(projection_dim=H),
        image_token_index=V - 1, projection_dim=H))


def _smolvlm():
    return tf.SmolVLMForConditionalGeneration(tf.SmolVLMConfig(
        text_config=tf.LlamaConfig(**_text()), vision_config=tf.SmolVLMVisionConfig(
            hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
            image_size=16, patch_size=8), image_token_id=V - 1, scale_factor=1))


def _aya_vision():
    return tf.AyaVisionForConditionalGeneration(tf.AyaVisionConfig(
        text_config=tf.CohereConfig(**_text()), vision_config=_siglip(), image_token_index=V - 1,
        downsample_factor=1))


def _internvl():
    return tf.InternVLForConditionalGeneration(tf.InternVLConfig(
        text_config=tf.Qwen2Config(**_text()), vision_config=tf.InternVLVisionConfig(
            hidden_size=16, intermediate_size=32, num_hidden_layers=L, num_attention_heads=2,
            image_size=[16, 16], patch_size=[8, 8]), image_token_id=V - 1, downsample_ratio=1.0))


def _llava_next():
    return tf.LlavaNextForConditionalGeneration(tf.LlavaNextConfig(
        text_config=tf.MistralConfig(**_text()),
        vision_config=tf.CLIPVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=L,
                                          num_attention_heads=2, image_size=16, patch_size=8),
        image_token_index=V - 1, image_grid_pinpoints=[[16, 16]]))


def _text_model(cfg_cls, model_cls, **kw):
    return lambda: model_cls(cfg_cls(**_text(**kw)))


class OddWrapper(nn.Module):
    """Not a transformers class: a text decoder at `brain.llm.model.layers`, a vision-like list of
    the same length at `eyes.blocks`, and a config whose `language_config` holds the layer count."""

    def __init__(self):
        super().__init__()
        text = tf.LlamaConfig(**_text())
        self.config = tf.PretrainedConfig()
        self.config.language_config = text
        self.eyes = nn.Module()
        self.eyes.blocks = nn.ModuleList(nn.Linear(H, H) for _ in range(L))
        self.brain = nn.Module()
        self.brain.llm = tf.LlamaForCausalLM(text)

    def forward(self, input_ids, **kw):
        return self.brain.llm(input_ids=input_ids, **kw)


# name -> builder; none of these classes is named in eagle_nb's source
ARCHS = {
    "qwen2_vl": _qwen2_vl, "mllama": _mllama, "idefics3": _idefics3, "paligemma": _paligemma,
    "smolvlm": _smolvlm, "aya_vision": _aya_vision, "internvl": _internvl, "llava_next": _llava_next,
    "opt": lambda: tf.OPTForCausalLM(tf.OPTConfig(vocab_size=V, hidden_size=H, ffn_dim=64,
                                                  num_hidden_layers=L, num_attention_heads=4,
                                                  word_embed_proj_dim=H, max_position_embeddings=64)),
    "falcon": lambda: tf.FalconForCausalLM(tf.FalconConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L,
                                                           num_attention_heads=4)),
    "gpt_neox": lambda: tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(**_text())),
    "olmo2": _text_model(tf.Olmo2Config, tf.Olmo2ForCausalLM),
    "starcoder2": _text_model(tf.Starcoder2Config, tf.Starcoder2ForCausalLM),
    "cohere": _text_model(tf.CohereConfig, tf.CohereForCausalLM),
    "odd_wrapper": OddWrapper,
}


def _build(name):
    torch.manual_seed(0)
    return ARCHS[name]().eval()


def _final_norm(model, path):
    parent = model.get_submodule(path.rsplit(".", 1)[0])
    for attr in ("norm", "ln_f", "final_layer_norm", "final_layernorm"):
        if isinstance(getattr(parent, attr, None), nn.Module):
            return getattr(parent, attr)
    return None


@pytest.mark.parametrize("name", list(ARCHS))
def test_unlisted_architectures_capture_equals_hidden_states(name):
    """The decoder layers are found without a path hint; captured states at every HF id equal
    output_hidden_states (id L: pre-norm, so final_norm(state) == hidden_states[L]); no hook is
    left behind."""
    model = _build(name)
    assert text_layer_count(model) == L
    path, layers = find_decoder_layers(model)
    assert len(layers) == L
    assert not any(t in path for t in ("vision", "visual", "eyes"))
    ids = torch.randint(3, V - 8, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model(input_ids=ids, output_hidden_states=True)   # transformers installs its own hooks once
    before = hook_count(model)
    with torch.no_grad(), capture(model, range(L + 1)) as states:
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states
    assert hook_count(model) == before
    ran = [k for k in range(L) if k in states.states]
    if name == "mllama":   # its cross-attention layer 2 is skipped on text-only input, by HF too
        assert ran == [0, 1, 3, 4]
    else:
        assert ran == list(range(L))
    assert len(hidden) == len(ran) + 1
    for i, k in enumerate(ran):
        assert torch.equal(states[k], hidden[i]), f"{name}: layer {k} ({path})"
    norm = _final_norm(model, path)
    if norm is not None:
        torch.testing.assert_close(norm(states[L]), hidden[-1])
        assert not torch.allclose(states[L], hidden[-1])


def test_vision_list_of_the_same_length_is_not_taken():
    """LlavaNext whose vision tower has as many layers as the text decoder: the text decoder's
    list is chosen, because get_decoder() says where the language model is."""
    model = _build("llava_next")
    lens = [n for n, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) == L]
    assert len(lens) >= 2, lens              # the ambiguity is real
    path, _ = find_decoder_layers(model)
    assert "language_model" in path


def test_config_layer_count_that_fits_no_list_is_a_clear_error():
    """A config that says 6 layers on a 5-layer model: an error naming the count and the lists."""
    model = _build("olmo2")
    model.config.num_hidden_layers = 6
    with pytest.raises(ValueError, match=r"num_hidden_layers = 6.*model\.layers \(5\)"):
        find_decoder_layers(model)
