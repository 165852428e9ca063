"""Tiny, seeded, CPU-only builders shared by the tests: a drafter with non-trivial weights and a
valid vocabulary map, and a stock HF Llama target; the speculation loop's tiny pair and its mocks;
every stock architecture as a tiny model; planted drafters; browser, figure and memory probes.
Test modules share code only through here, never by importing one another (tests/test_layout.py).

Sizes follow STYLE.md rule 12: hidden 32, vocab 128, a handful of layers.
"""
from __future__ import annotations

import inspect
import json
import os
import random
import shutil
from pathlib import Path

import torch
import transformers as tf
from torch import nn

from eagle_nb.io.paths import REPO_ROOT, CODE_DRAFTER_SPECULATORS
from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.drafter import Eagle3Drafter
from eagle_nb.model.kv_cache import KVCache

H, V, VD = 32, 128, 64       # drafter width, target vocab, draft vocab
AUX_HF = [2, 4, 5]           # aux layer ids (HF hidden_states convention) for an 8-layer target


def tiny_drafter_config(**overrides) -> DrafterConfig:
    """A small valid DrafterConfig: GQA (4 heads, 2 kv heads), 3 aux layers, Vd < V."""
    kw = dict(hidden_size=H, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
              vocab_size=V, draft_vocab_size=VD, aux_layer_ids=list(AUX_HF), rms_norm_eps=1e-6,
              max_position_embeddings=64)
    kw.update(overrides)
    return DrafterConfig(**kw)


def vocab_map(vocab: int, draft_vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(d2t, t2d) as the public builders make them: `draft_vocab` distinct target ids, sorted,
    stored as int64 offsets `selected[i] - i`, plus the bool mask of the selected ids."""
    g = torch.Generator().manual_seed(seed)
    selected = torch.randperm(vocab, generator=g)[:draft_vocab].sort().values
    d2t = (selected - torch.arange(draft_vocab)).to(torch.int64)
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[selected] = True
    return d2t, t2d


@torch.no_grad()
def randomize_(module: torch.nn.Module, seed: int = 0, std: float = 0.2) -> torch.nn.Module:
    """Overwrite every floating parameter with N(0, std) (norm weights: 1 + N(0, std)), so logits
    are far from flat and a wrong wiring changes them visibly."""
    g = torch.Generator().manual_seed(seed)
    for name, p in module.named_parameters():
        noise = torch.randn(p.shape, generator=g) * std
        p.copy_(1.0 + noise if "norm" in name else noise)
    return module


def tiny_drafter(seed: int = 0, vocab: int = V, draft_vocab: int = VD, **cfg_overrides) -> Eagle3Drafter:
    """An eval-mode float32 Eagle3Drafter with random weights (std 0.2) and a valid, non-identity
    d2t/t2d when draft_vocab < vocab."""
    cfg = tiny_drafter_config(vocab_size=vocab, draft_vocab_size=draft_vocab, **cfg_overrides)
    torch.manual_seed(seed)
    d = Eagle3Drafter(cfg)
    randomize_(d, seed)
    if draft_vocab < vocab:
        d2t, t2d = vocab_map(vocab, draft_vocab, seed)
        d.d2t.copy_(d2t)
        d.t2d.copy_(t2d)
    return d.eval()


def tiny_features(drafter: Eagle3Drafter, B: int = 2, T: int = 7, seed: int = 0):
    """Random (input_ids (B, T), target_features (B, T, n_aux*Ht)) for `drafter`."""
    g = torch.Generator().manual_seed(seed)
    c = drafter.config
    ids = torch.randint(0, c.vocab_size, (B, T), generator=g)
    feats = torch.randn(B, T, c.fc_in_features, generator=g)
    return ids, feats


def tiny_llama(num_layers: int = 8, hidden: int = 32, vocab: int = 128, seed: int = 0):
    """A stock HF LlamaForCausalLM (eval, float32) from a tiny random config."""
    cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(seed)
    return tf.LlamaForCausalLM(cfg).eval()


def target_for(drafter: Eagle3Drafter, num_layers: int = 8, seed: int = 0):
    """A tiny Llama target whose input embedding equals the drafter's `embed_tokens`, so formats
    that do not store the embedding (A, B) reload to the same drafter."""
    c = drafter.config
    t = tiny_llama(num_layers, c.target_hidden_size, c.vocab_size, seed)
    with torch.no_grad():
        t.get_input_embeddings().weight.copy_(drafter.embed_tokens.weight)
    return t


def cache_kwarg(model) -> str:
    """Name of the forward kwarg carrying the KV cache: `cache` (transformers 5) or
    `past_key_values` (4.x)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def output_cache(out):
    """The returned cache of an HF forward, whichever attribute name this version uses."""
    return out["cache"] if "cache" in out else out["past_key_values"]


# -- the speculation loop's tiny pair and its mocks (tests/loop/) ----------------------------------
# An 8-layer Llama target (hidden H, vocab LOOP_V) and an EAGLE-3 drafter reading target layers
# LAYER_IDS, weights drawn with std 0.2 so the random target's greedy continuation varies; the mocks
# pin the acceptance count where random weights cannot (tests/loop/test_speculate.py says how).
LOOP_V, LOOP_VD = 64, 48         # the loop pair's target vocab and reduced draft vocab
LAYER_IDS = [2, 4, 5]            # HF hidden_states ids captured for the drafter's fc
PROMPTS = [[5], [17, 3, 42, 9, 60], [7, 7, 21, 33, 50, 12, 8, 41, 19, 27, 30]]


def _normal_(module: nn.Module, std: float) -> None:
    # Matrices only: biases and norm weights keep their defaults.
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() > 1:
                p.normal_(0.0, std)


def make_target(seed: int = 0, std: float = 0.2) -> tf.LlamaForCausalLM:
    """The loop's 8-layer Llama target (hidden H, vocab LOOP_V), matrices drawn with `std`."""
    torch.manual_seed(seed)
    cfg = tf.LlamaConfig(vocab_size=LOOP_V, hidden_size=H, intermediate_size=64,
                         num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=1, eos_token_id=2,
                         pad_token_id=0)
    model = tf.LlamaForCausalLM(cfg)
    _normal_(model, std)
    return model.eval()


def set_draft_vocab(drafter: Eagle3Drafter, selected) -> None:
    """d2t/t2d for a draft vocabulary made of the target ids `selected` (sorted, as the engines)."""
    sel = torch.as_tensor(sorted(selected), dtype=torch.long)
    assert sel.numel() == drafter.config.draft_vocab_size
    drafter.d2t.copy_(sel - torch.arange(sel.numel()))
    drafter.t2d.zero_()
    drafter.t2d[sel] = True


def make_drafter(target, seed: int = 1, draft_vocab: int = LOOP_VD,
                 selected=None) -> Eagle3Drafter:
    """An EAGLE-3 drafter on LAYER_IDS sharing `target`'s embedding, matrices drawn with std 0.2,
    drafting the target ids `selected` (default: a seeded random `draft_vocab` of them)."""
    torch.manual_seed(seed)
    cfg = DrafterConfig(hidden_size=H, num_attention_heads=4, num_key_value_heads=2,
                        intermediate_size=64, vocab_size=LOOP_V, draft_vocab_size=draft_vocab,
                        aux_layer_ids=LAYER_IDS)
    drafter = Eagle3Drafter(cfg)
    _normal_(drafter, 0.2)
    with torch.no_grad():
        drafter.embed_tokens.weight.copy_(target.model.embed_tokens.weight)
    if selected is None:
        selected = torch.randperm(LOOP_V)[:draft_vocab]
    set_draft_vocab(drafter, selected)
    return drafter.eval()


def constant_target() -> tf.LlamaForCausalLM:
    """All logits equal: the greedy token is 0 at every position (argmax takes the first max)."""
    target = make_target()
    with torch.no_grad():
        target.lm_head.weight.zero_()
    return target


def zero_one_target() -> tf.LlamaForCausalLM:
    """Greedy token is 0 where v.h >= u.h and 1 elsewhere, h the target's real final state."""
    target = make_target()
    gen = torch.Generator().manual_seed(102)
    u, v = torch.randn(H, generator=gen), torch.randn(H, generator=gen)
    with torch.no_grad():
        target.lm_head.weight[:] = u
        target.lm_head.weight[0] = v
    return target


def constant_drafter(target, draft0_to: int = 0) -> Eagle3Drafter:
    """Always drafts draft id 0, which maps to target id `draft0_to` (real fc/midlayer states)."""
    drafter = make_drafter(target, seed=2, selected=range(draft0_to, draft0_to + LOOP_VD))
    with torch.no_grad():
        drafter.lm_head.weight.zero_()
    assert int(drafter.draft_to_target(torch.tensor([0]))) == draft0_to
    return drafter


class OracleDrafter(nn.Module):
    """Duck-typed drafter that drafts the target's own greedy continuation `full` (prompt +
    reference), except at drafter positions in `wrong`, where it drafts the next id instead.
    Pairing (docs/drafter.md): drafter position p reads the embedding of token p+1 and
    predicts token p+2. Every extend over verified tokens is checked against `full`."""

    def __init__(self, full: list[int], wrong_rate: float = 0.3, seed: int = 0):
        super().__init__()
        self.fc = nn.Linear(1, 1, bias=False)    # generate() reads fc.weight's device and dtype
        self.full = full
        rng = random.Random(seed)
        self.wrong = {p for p in range(len(full)) if rng.random() < wrong_rate}
        self._extend = False
        self.pairing_errors: list[tuple[int, list[int]]] = []

    def new_cache(self, batch_size, max_len):
        return KVCache(1, batch_size, max_len, 1, 1)

    def fuse(self, feats, fc_policy="strict"):
        self._extend = True
        return feats[..., :H]

    def step(self, input_ids, g, cache, start):
        T = input_ids.shape[1]
        cache.update(0, start, torch.zeros(1, 1, T, 1), torch.zeros(1, 1, T, 1))  # no holes
        ids = input_ids[0].tolist()
        if self._extend and ids != self.full[start + 1:start + 1 + T]:
            self.pairing_errors.append((start, ids))
        self._extend = False
        logits = torch.zeros(1, T, LOOP_V)
        for j in range(T):
            p = start + j
            tok = self.full[p + 2] if p + 2 < len(self.full) else 0
            logits[0, j, (tok + 1) % LOOP_V if p in self.wrong else tok] = 10.0
        return logits, torch.zeros(1, T, H)

    def draft_to_target(self, draft_ids, d2t=None):
        return draft_ids


def build(kind: str, prompt: list[int], horizon: int = 64):
    """(target, drafter) of the named kind; the oracle needs the prompt to know the future."""
    if kind == "random":
        target = make_target()
        return target, make_drafter(target)
    if kind == "zero-one":
        target = zero_one_target()
        return target, constant_drafter(target, 0)
    if kind == "oracle":
        from eagle_nb.loop.chain import greedy_reference
        target = make_target()
        ref, _ = greedy_reference(target, ids_of(prompt), horizon)
        return target, OracleDrafter(prompt + ref, seed=len(prompt))
    if kind == "agree-all":
        target = constant_target()
        return target, constant_drafter(target, 0)
    if kind == "agree-none":
        target = constant_target()
        return target, constant_drafter(target, 1)
    raise KeyError(kind)


def ids_of(tokens: list[int]) -> torch.Tensor:
    """A batch of one: (1, T) ids."""
    return torch.tensor([tokens])


def chisq_p(counts, probs) -> float:
    """Chi-square p-value of `counts` against `probs` (zero-probability ids must have no count)."""
    import numpy as np
    from scipy import stats as sps
    probs = np.asarray(probs, dtype=float)
    counts = np.asarray(counts, dtype=float)
    keep = probs > 0
    assert counts[~keep].sum() == 0
    return sps.chisquare(counts[keep], counts.sum() * probs[keep] / probs[keep].sum()).pvalue


# -- every stock architecture, tiny (tests/model/test_capture.py, tests/loop/test_tree.py) ---------
# Hidden H, vocab V, ARCH_LAYERS decoder layers, seeded, built offline. 7 is the smallest depth for
# which the EAGLE-3 defaults (2, L//2, L-3) are distinct: L=6 gives (2, 3, 3).
ARCH_LAYERS = 7          # decoder layers of every tiny target (hidden H, vocab V)
MAX_TEXT_ID = V - 8      # text ids are drawn below this; multimodal special tokens live above it
SPECIAL = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)  # in-vocab ids: no config warnings


def text_config(**overrides) -> dict:
    """Keyword arguments of a tiny text config (hidden H, vocab V, ARCH_LAYERS layers, GQA 4/2)."""
    cfg = dict(vocab_size=V, hidden_size=H, intermediate_size=64, num_hidden_layers=ARCH_LAYERS,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **SPECIAL)
    cfg.update(overrides)
    return cfg


def _vision(cls, **overrides):
    # One-layer 16x16 vision tower: never run (text-only inputs), only constructed.
    cfg = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
               image_size=16, patch_size=8)
    cfg.update(overrides)
    return cls(**cfg)


def _deepseek_v3():
    # NOTE: MLA expands k/v to num_attention_heads heads in kv_b_proj, but the attention call still
    # repeats them by num_attention_heads // num_key_value_heads; with fewer kv heads SDPA fails
    # ("size of tensor a (4) must match ... (8)"). Real DeepSeek-V3 configs set both to 128.
    return tf.DeepseekV3ForCausalLM(tf.DeepseekV3Config(**text_config(
        num_key_value_heads=4, moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2,
        n_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=1, kv_lora_rank=16,
        q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)))


def _gemma3_multimodal():
    # mm_tokens_per_image must be a square that divides the (16/8)^2 = 4 patches.
    return tf.Gemma3ForConditionalGeneration(tf.Gemma3Config(
        text_config=tf.Gemma3TextConfig(**text_config(head_dim=8)),
        vision_config=_vision(tf.SiglipVisionConfig), mm_tokens_per_image=4,
        image_token_index=V - 1, boi_token_index=V - 2, eoi_token_index=V - 3))


def _qwen2_5_vl():
    # M-RoPE: mrope_section must sum to head_dim / 2 = 4.
    text = text_config(rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]})
    vision = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=H,
                  patch_size=4, window_size=8, fullatt_block_indexes=[0])
    return tf.Qwen2_5_VLForConditionalGeneration(tf.Qwen2_5_VLConfig(
        text_config=text, vision_config=vision, image_token_id=V - 1, video_token_id=V - 2,
        vision_start_token_id=V - 3, vision_end_token_id=V - 4))


# name -> (builder, expected class name, decoder layer path, final norm path)
ARCHS = {
    "llama": (lambda: tf.LlamaForCausalLM(tf.LlamaConfig(**text_config())),
              "LlamaForCausalLM", "model.layers", "model.norm"),
    "mistral": (lambda: tf.MistralForCausalLM(tf.MistralConfig(**text_config())),
                "MistralForCausalLM", "model.layers", "model.norm"),
    "qwen2": (lambda: tf.Qwen2ForCausalLM(tf.Qwen2Config(**text_config())),
              "Qwen2ForCausalLM", "model.layers", "model.norm"),
    "qwen3": (lambda: tf.Qwen3ForCausalLM(tf.Qwen3Config(**text_config(head_dim=8))),
              "Qwen3ForCausalLM", "model.layers", "model.norm"),
    "qwen3_moe": (lambda: tf.Qwen3MoeForCausalLM(tf.Qwen3MoeConfig(**text_config(
        head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16))),
        "Qwen3MoeForCausalLM", "model.layers", "model.norm"),
    "mixtral": (lambda: tf.MixtralForCausalLM(tf.MixtralConfig(**text_config(
        num_local_experts=4, num_experts_per_tok=2))),
        "MixtralForCausalLM", "model.layers", "model.norm"),
    "gemma2": (lambda: tf.Gemma2ForCausalLM(tf.Gemma2Config(**text_config(head_dim=8))),
               "Gemma2ForCausalLM", "model.layers", "model.norm"),
    "gemma3_text": (lambda: tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(**text_config(head_dim=8))),
                    "Gemma3ForCausalLM", "model.layers", "model.norm"),
    "gemma3_multimodal": (_gemma3_multimodal, "Gemma3ForConditionalGeneration",
                          "model.language_model.layers", "model.language_model.norm"),
    "phi3": (lambda: tf.Phi3ForCausalLM(tf.Phi3Config(**text_config())),
             "Phi3ForCausalLM", "model.layers", "model.norm"),
    "gpt2": (lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=V, n_embd=H, n_layer=ARCH_LAYERS, n_head=4, n_positions=64, bos_token_id=1,
        eos_token_id=2)),
        "GPT2LMHeadModel", "transformer.h", "transformer.ln_f"),
    "deepseek_v3": (_deepseek_v3, "DeepseekV3ForCausalLM", "model.layers", "model.norm"),
    "llava": (lambda: tf.LlavaForConditionalGeneration(tf.LlavaConfig(
        text_config=tf.LlamaConfig(**text_config()), vision_config=_vision(tf.CLIPVisionConfig),
        image_token_index=V - 1)),
        "LlavaForConditionalGeneration", "model.language_model.layers", "model.language_model.norm"),
    "mistral3": (lambda: tf.Mistral3ForConditionalGeneration(tf.Mistral3Config(
        text_config=tf.MistralConfig(**text_config()),
        vision_config=_vision(tf.PixtralVisionConfig, head_dim=8), image_token_index=V - 1)),
        "Mistral3ForConditionalGeneration", "model.language_model.layers", "model.language_model.norm"),
    "qwen2_5_vl": (_qwen2_5_vl, "Qwen2_5_VLForConditionalGeneration",
                   "model.language_model.layers", "model.language_model.norm"),
}


def build_arch(name: str) -> nn.Module:
    """The tiny seeded eval-mode model of ARCHS[name]."""
    torch.manual_seed(0)
    return ARCHS[name][0]().eval()


def text_ids(model: nn.Module, batch: int = 2, seq: int = 9) -> torch.Tensor:
    """Random text ids that avoid every special/multimodal token id of `model`'s config."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, MAX_TEXT_ID, (batch, seq), generator=g)
    special = {v for k, v in model.config.to_dict().items()
               if k.endswith(("token_id", "token_index")) and isinstance(v, int)}
    assert not special & set(ids.flatten().tolist())
    return ids


# -- planted drafters (tests/doctor/) --------------------------------------------------------------
def plant(tmp_path: Path, src=CODE_DRAFTER_SPECULATORS, weights=None, config=None,
          name="d") -> Path:
    """Copy a shipped drafter, then edit its tensors (`weights(state) -> state`) and/or config."""
    from safetensors.torch import load_file, save_file
    out = tmp_path / name
    shutil.copytree(src, out)
    if weights is not None:
        st = weights(load_file(str(out / "model.safetensors")))
        save_file({k: v.contiguous() for k, v in st.items()}, str(out / "model.safetensors"))
    if config is not None:
        cfg = json.loads((out / "config.json").read_text())
        config(cfg)
        (out / "config.json").write_text(json.dumps(cfg))
    return out


# -- hooks ------------------------------------------------------------------------------------------
def hook_count(model) -> int:
    """Number of forward (pre-)hooks registered anywhere on `model`. Tests compare it before and
    after a capture block (transformers 5 leaves hooks of its own after `output_hidden_states`)."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


# -- rendered reports in a real browser (headless Chromium) -------------------------------------------
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable, or None."""
    import shutil
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _chromium(args, timeout: int):
    import subprocess
    import tempfile
    exe = find_chromium()
    if exe is None:
        raise FileNotFoundError("no chromium executable on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


def browser_dom(url: str, budget_ms: int = 3000, timeout: int = 120) -> str:
    """The page's DOM after its scripts ran, from headless Chromium (`--dump-dom`). A URL fragment
    such as `#fault=fc-bypass&depth=4` preselects a state of every `StaticSwitcher` on the page."""
    return _chromium([f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout).stdout


def browser_screenshot(url: str, path, size=(1200, 4000), timeout: int = 180):
    """A PNG screenshot of the page from headless Chromium."""
    from pathlib import Path
    _chromium([f"--window-size={size[0]},{size[1]}", f"--screenshot={path}", url], timeout)
    return Path(path)


def _chromium_mark():
    import pytest
    return pytest.mark.skipif(find_chromium() is None,
                              reason="chromium not installed (Debian: apt-get install chromium)")


needs_chromium = _chromium_mark()


def shown_states(dom: str) -> list[str]:
    """data-state of every precomputed switcher state the browser left visible."""
    import re
    return [k.replace("&amp;", "&") for k, hidden in
            re.findall(r'class="enb-state" data-state="([^"]+)"( hidden(?:="")?)?', dom) if not hidden]


def long_floats(page: str) -> list[str]:
    """Numbers in the page text with more than 4 decimals (raw floats)."""
    import re
    text = re.sub(r"<[^>]+>|data:image/png;base64,[A-Za-z0-9+/=]+", " ", page)
    return re.findall(r"\d+\.\d{5,}", text)


# -- a fake Pair for panels and switchers -----------------------------------------------------------
class FakePair:
    """Stands in for `experiment.pair.Pair` (STYLE rule 12): `run` records every call and returns exact
    metrics that depend on the setting (healthy accepts every draft, any fault none); `fail` names
    faults that raise. `sweep` is Pair.sweep's contract: one `run` per setting."""

    temperatures = (0.0, 1.0)      # what Pair computes (the panels offer these)
    trees = True

    def __init__(self, fail=()):
        self.calls: list = []
        self.layer_ids = [2, 4, 5]
        self.fail = set(fail)

    def run(self, prompts, setting=None, *, check_reference=False, progress=True):
        from eagle_nb.loop.metrics import from_stats
        from eagle_nb.experiment.results import RunResult
        from eagle_nb.loop.chain import SpecStats, VerifyStep
        s = setting
        self.calls.append(s)
        if self.fail & set(s.faults):
            raise ValueError(f"cannot apply {sorted(self.fail & set(s.faults))}")
        k = s.depth
        a = 0 if s.faults else k
        steps = [VerifyStep(a, list(range(k)), list(range(k + 1))) for _ in range(3)]
        st = SpecStats(k, s.temperature, 3, tokens=[1] * (3 * (a + 1)), steps=steps, total_s=1.0)
        wiring = {"layer_ids_hf": [i + s.layer_shift for i in self.layer_ids], "feature_mode": "aux"}
        return RunResult(s, list(prompts), ["x"] * len(prompts), [st], from_stats([st]), wiring,
                         notes=[f"{n}: note" for n in s.faults])

    def sweep(self, prompts, settings, *, progress=True):
        from eagle_nb.experiment.results import Sweep
        return Sweep(self.run(prompts, s) for s in settings)


# -- figure legibility -------------------------------------------------------------------------------
def shown_texts(fig, shown_width_px=None, dpi=None):
    """[(text, size in pt as shown, window extent)] of every visible, non-empty text of a figure.

    The figure is saved as a PNG at `dpi` pixels per inch (palette.DPI) and shown at its natural
    size, or scaled down to `shown_width_px` CSS pixels (palette.SHOWN_WIDTH_PX) if wider; one CSS
    pixel is 0.75 pt. So a text of `s` pt appears at s * dpi/96 * min(1, shown / natural) pt."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from eagle_nb.views import palette
    dpi = dpi or palette.DPI
    shown_width_px = shown_width_px or palette.SHOWN_WIDTH_PX
    fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    natural = fig.get_figwidth() * dpi
    scale = min(1.0, shown_width_px / natural)
    out = []
    for t in fig.findobj(Text):
        if not t.get_visible() or not t.get_text().strip() or t.figure is None:
            continue
        out.append((t.get_text(), t.get_fontsize() * dpi / 96 * scale, t.get_window_extent(renderer)))
    return out


def legibility_problems(fig, min_pt: float = 7.0) -> list[str]:
    """What makes a figure hard to read: text smaller than `min_pt` as shown, text cut by the
    figure's edge, and non-tick texts printed over one another."""
    from matplotlib.transforms import Bbox
    texts = shown_texts(fig)
    W, H = fig.bbox.width, fig.bbox.height
    probs = [f"{s!r} shown at {pt:.1f} pt < {min_pt} pt" for s, pt, _ in texts if pt < min_pt - 1e-6]
    ticks = {id(t) for ax in fig.axes for t in ax.get_xticklabels() + ax.get_yticklabels()}
    from matplotlib.text import Text
    objs = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and t.figure]
    drawn = []
    for t, (s, _, bb) in zip(objs, texts):
        inside = bb.x0 >= -1 and bb.y0 >= -1 and bb.x1 <= W + 1 and bb.y1 <= H + 1
        if id(t) in ticks and not inside:
            continue                      # a tick label matplotlib does not draw (outside the view)
        if not inside:
            probs.append(f"{s!r} cut by the figure edge ({bb.x0:.0f},{bb.y0:.0f})-({bb.x1:.0f},{bb.y1:.0f}) "
                         f"in {W:.0f}x{H:.0f}")
        drawn.append((s, bb, id(t) in ticks))
    for i, (s, bb, tick) in enumerate(drawn):
        for s2, bb2, tick2 in drawn[:i]:
            if tick and tick2:
                continue                  # tick labels of one axis: matplotlib spaces them
            inter = Bbox.intersection(bb, bb2)
            if inter is not None and inter.width > 2 and inter.height > 2:
                probs.append(f"{s!r} printed over {s2!r}")
    return probs


# -- Playwright on the system Chromium (no browser download) -------------------------------------------
def playwright_missing() -> str | None:
    """Why the Playwright tests cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright not installed (pip install playwright; no browser download needed)"
    return None if find_chromium() else "chromium not installed (Debian: apt-get install chromium)"


def needs_playwright():
    import pytest
    return pytest.mark.skipif(playwright_missing() is not None, reason=str(playwright_missing()))


def launch_chromium(pw):
    """Headless system Chromium driven by Playwright, with the kit's offline flags."""
    return pw.chromium.launch(executable_path=find_chromium(), headless=True,
                              args=[f for f in CHROMIUM_FLAGS if f != "--headless"])


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- memory of one CLI run -------------------------------------------------------------------------
def peak_rss_mb(*argv: str) -> float:
    """Peak resident memory (MiB) of `eagle-nb ARGV...` in a fresh process, by the package's one
    meter (eagle_nb/io/peak_memory.py); raises when it does not exit 0."""
    from eagle_nb.io.peak_memory import peak_rss_mib
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return peak_rss_mib(["-m", "eagle_nb", *argv], env=env, cwd=REPO_ROOT, timeout=300)


def code_prompts(n: int | None = None) -> list[str]:
    """The code pair's evaluation prompts (the first `n`)."""
    from eagle_nb.io.prompts import read_prompts
    from eagle_nb.io.paths import CODE_PROMPTS
    p = read_prompts(CODE_PROMPTS)
    return p[:n] if n else p


def code_pair(**kw):
    """The code pair loaded (target, format-A drafter, its format-C copy for the key faults)."""
    from eagle_nb.experiment.pair import Pair
    from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET
    return Pair(CODE_TARGET, CODE_DRAFTER, speculators_path=str(CODE_DRAFTER_SPECULATORS), **kw)


def wiring_changes(a, b) -> set[str]:
    """The Wiring fields in which `b` differs from `a` (models and the d2t table by identity)."""
    from eagle_nb.experiment.wiring import FIELDS
    out = set()
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        same = (x is y) if f in ("target", "drafter", "d2t") else x == y
        out |= set() if same else {f}
    return out
