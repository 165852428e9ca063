"""Loading target models (the shipped one or a user's) and building the wrapper copy.

Knows about Hugging Face loading, devices, and the multimodal wrapper layout; nothing about EAGLE.
Loading is offline-friendly and never runs checkpoint code unless `trust_remote_code=True` is
passed explicitly.
"""
from __future__ import annotations

import os
import weakref
from pathlib import Path

import torch

from eagle_nb.io.paths import SHIPPED_TARGET, shipped


class TargetError(FileNotFoundError):
    """The target cannot be found or opened as given; the message says what was looked for."""


def pick_device(device: str | None = None) -> torch.device:
    """`device` if given (checked: it must exist here), else CUDA if available, else CPU."""
    if not device or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device {device!r} (--device) is not a device name torch knows, e.g. 'cpu', "
                         f"'cuda', 'cuda:1', 'mps' ({str(e).splitlines()[0][:120]})") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} (--device): CUDA is not available here (torch "
                             f"{torch.__version__}, CUDA build: {torch.version.cuda or 'none'}); use "
                             f"--device cpu, or leave it unset to pick CUDA only when present")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r} (--device): only {torch.cuda.device_count()} CUDA "
                             f"device(s) visible")
    if dev.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"device {device!r} (--device): MPS is not available here; use --device cpu")
    return dev


FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def check_dtype(dtype):
    if dtype is None or dtype == "auto" or isinstance(dtype, torch.dtype) and dtype.is_floating_point:
        return dtype
    if isinstance(dtype, str) and dtype.removeprefix("torch.") in FLOAT_DTYPES:
        return getattr(torch, dtype.removeprefix("torch."))
    raise ValueError(f"dtype {dtype!r} (--param dtype=...): choose one of {list(FLOAT_DTYPES)} or 'auto'")


def resolve_target(path) -> Path | str:
    """A checkpoint directory holding a readable config.json, or a hub id already in the local
    Hugging Face cache (nothing is downloaded). Anything else is a TargetError saying what was
    looked for."""
    from eagle_nb.io.files import UserFileError, is_dir, read_json_object, show
    from eagle_nb.io.hub import cache_dir, cached_snapshot, looks_like_hub_id
    p = Path(path)
    if os.path.lexists(p) and not is_dir(p):
        raise TargetError(f"target {show(p)} is a file; expected a Hugging Face checkpoint directory "
                          f"(config.json, weights, tokenizer files)")
    if is_dir(p):
        if not os.path.lexists(p / "config.json"):
            raise TargetError(f"target {show(p)}: no config.json (expected a Hugging Face checkpoint "
                              f"directory)")
        try:
            read_json_object(p / "config.json", "target config")
        except UserFileError as e:
            raise TargetError(str(e)) from None
        for e in os.scandir(p):     # a FIFO among the files would block from_pretrained forever
            if not (e.is_file() or e.is_dir()):
                raise TargetError(f"target {show(p)}: {show(e.name)} is not a regular file (a FIFO, "
                                  f"socket or broken link); remove or replace it")
        return p
    s = str(path)
    if cached_snapshot(s) is None:
        raise TargetError(f"target {show(s)}: no such directory (looked for {show(p.absolute())})"
                          + (f", and {s!r} is not in the local Hugging Face cache ({cache_dir()}); "
                             f"eagle_nb never downloads: run `huggingface-cli download {s}` first or "
                             f"pass the checkpoint directory" if looks_like_hub_id(s) else ""))
    return s


def load_target(path=None, *, device: str | None = None, dtype=None, device_map=None,
                trust_remote_code: bool = False):
    """Load (model, tokenizer) with the Auto classes, from local files only. `path` defaults to the
    shipped target; a hub id works only if it is in the local cache. `device_map` is passed to
    `from_pretrained` (accelerate sharding for large targets)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    dev = pick_device(device) if device_map is None else None
    path = resolve_target(path) if path else shipped(SHIPPED_TARGET, "the shipped target")
    kwargs = {"trust_remote_code": trust_remote_code, "local_files_only": True}
    if dtype is not None:
        kwargs["dtype"] = check_dtype(dtype)
    if device_map is not None:
        kwargs["device_map"] = device_map
    model = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    if device_map is None:
        model.to(dev)
    model.eval()
    tok = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code, local_files_only=True)
    return model, tok


def make_wrapper(target):
    """The same weights inside a stock multimodal wrapper (`LlavaForConditionalGeneration`), whose
    text decoder sits at `model.language_model.layers` instead of `model.layers`. For text-only
    ids its logits equal the plain model's. Built on the fly: only a tiny vision tower is new."""
    from transformers import (
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
    )
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
    wrapper = wrapper.to(next(target.parameters()).device).eval()
    _TEXT_TWIN[wrapper] = target
    return wrapper


_TEXT_TWIN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # wrapper -> its plain model


def text_twin(model):
    """The plain model `make_wrapper` built `model` from, else `model` itself. On text ids a
    wrapper's logits and decoder states are its plain model's bit for bit (tests/model/test_capture.py),
    so one target pass over the plain model serves both; what capture code finds on the wrapper
    is still asked of the wrapper."""
    return _TEXT_TWIN.get(model, model)
