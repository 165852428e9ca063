"""Loading target models (the shipped one or a user's) and building the wrapper copy.

Knows about Hugging Face loading, devices, and the multimodal wrapper layout; nothing about EAGLE.
Loading is offline-friendly and never runs checkpoint code unless `trust_remote_code=True` is
passed explicitly.
"""
from __future__ import annotations

from pathlib import Path

import torch

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SHIPPED_TARGET = DATA_DIR / "target"
SHIPPED_DRAFTER = DATA_DIR / "drafter_eagle"
SHIPPED_DRAFTER_SPECULATORS = DATA_DIR / "drafter_speculators"
SHIPPED_PROMPTS = DATA_DIR / "eval_prompts.jsonl"


def pick_device(device: str | None = None) -> torch.device:
    """`device` if given, else CUDA if available, else CPU."""
    if device and device != "auto":
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def load_target(path=None, *, device: str | None = None, dtype=None, device_map=None,
                trust_remote_code: bool = False):
    """Load (model, tokenizer) with the Auto classes. `path` defaults to the shipped target.
    `device_map` is passed to `from_pretrained` (accelerate sharding for large targets)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path = Path(path) if path else SHIPPED_TARGET
    if path.is_dir() and not (path / "config.json").exists():
        raise FileNotFoundError(f"target {path}: no config.json (expected a Hugging Face checkpoint directory)")
    if not path.exists() and (str(path).startswith((".", "/")) or str(path).count("/") != 1):
        raise FileNotFoundError(f"target {path}: no such directory (a hub id 'org/name' is read "
                                f"from the local Hugging Face cache only)")
    kwargs = {"trust_remote_code": trust_remote_code}
    if dtype is not None:
        kwargs["dtype"] = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if device_map is not None:
        kwargs["device_map"] = device_map
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if device_map is None:
        model.to(pick_device(device))
    model.eval()
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    return model, tok


def make_wrapper(target):
    """The same weights inside a stock multimodal wrapper (`LlavaForConditionalGeneration`), whose
    text decoder sits at `model.language_model.layers` instead of `model.layers`. For text-only
    ids its logits equal the plain model's. Built on the fly: only a tiny vision tower is new."""
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration
    tcfg = target.config
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=2, image_size=16, patch_size=8)
    cfg = LlavaConfig(vision_config=vision, text_config=tcfg.to_dict(),
                      image_token_index=tcfg.vocab_size - 1)
    with torch.random.fork_rng(devices=[]):  # the tiny vision tower's init; caller's RNG untouched
        torch.manual_seed(0)
        wrapper = LlavaForConditionalGeneration(cfg).to(dtype=target.dtype)
    src = target.state_dict()
    remapped = {}
    for k, v in src.items():
        if k.startswith("model."):
            remapped["model.language_model." + k[len("model."):]] = v
        elif k == "lm_head.weight":
            remapped[k] = v
        else:
            raise KeyError(f"make_wrapper: unexpected target weight {k!r}")
    missing, unexpected = wrapper.load_state_dict(remapped, strict=False)
    not_vision = [k for k in missing if "vision_tower" not in k and "multi_modal_projector" not in k]
    if not_vision or unexpected:
        raise RuntimeError(f"make_wrapper: text weights missing {not_vision}, unexpected {unexpected}")
    return wrapper.to(next(target.parameters()).device).eval()
