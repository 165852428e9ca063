"""Known target architectures, read from `config.json` as data: where each keeps its text
decoder's layers, whether it is a multimodal wrapper around a language model, and what the serving
engines' class for it does with EAGLE-3 aux hidden states, and from which release.

The doctor reasons about a target from this table and the config alone: it never instantiates the
target to learn its structure and never runs a checkpoint's own code. For an architecture not in
the table, `layers_on_meta` builds the class transformers ships on the meta device (no weights, no
memory) and asks `decoder.find_decoder_layers`; a class only the checkpoint's code defines
(`auto_map`) is never built.

Engine facts come from the engines' own files in their released wheels and the PRs named:
SGLang `kimi_k25.py` has no `set_eagle3_layers_to_capture` / `get_embed_and_head` in 0.5.9 and
delegates both to its `DeepseekV3ForCausalLM` language model from 0.5.10 (PR #19689); SGLang
`qwen2_5_vl.py` captured the aux states but did not hand them to its logits processor in 0.5.5.post3
(after PR #13075) and does again in 0.5.6 (PR #13904); SGLang `llama_eagle3.py` applies `fc` only
when the hidden state it is handed is not already `hidden_size` wide. What every engine needs from
a target class is its registry entry's (`engines/*.py`, `target_needs`). Knows config dicts only.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TEXT_LAYERS = "model.layers"

@dataclass(frozen=True)
class Architecture:
    name: str                   # `architectures[0]` in config.json
    layers: str                 # decoder layers as the published checkpoints name them
    wrapper: bool = False       # a multimodal wrapper around a language model
    engines: tuple[str, ...] = ()   # what the engines' class for it does with aux states, by release

    @property
    def kind(self) -> str:
        return "multimodal wrapper" if self.wrapper else "text decoder"


def _text(name: str, *engines: str) -> Architecture:
    return Architecture(name, TEXT_LAYERS, False, engines)


ARCHITECTURES = {a.name: a for a in (
    _text("LlamaForCausalLM", "SGLang `llama.py` captures aux states (EAGLE-3 support, PR #4247)",
          "vLLM `llama.py` implements SupportsEagle3 (PR #16937)"),
    _text("MistralForCausalLM"), _text("MixtralForCausalLM"),
    _text("Qwen2ForCausalLM", "SGLang `qwen2.py` captures aux states from PR #9216 (before it: "
          "'object has no attribute capture_aux_hidden_states')"),
    _text("Qwen3ForCausalLM"), _text("Qwen3MoeForCausalLM"),
    _text("DeepseekV2ForCausalLM", "SGLang `deepseek_v2.py` captures aux states (PR #12319)"),
    _text("DeepseekV3ForCausalLM", "SGLang `deepseek_v2.py` captures aux states (PR #12319); "
          "Kimi-K2 (`model_type` kimi_k2) is served by this class"),
    _text("DeepseekV32ForCausalLM"), _text("Glm4MoeForCausalLM"), _text("GptOssForCausalLM"),
    _text("Gemma2ForCausalLM"), _text("Gemma3ForCausalLM"), _text("Phi3ForCausalLM"),
    Architecture("KimiK25ForConditionalGeneration", "language_model.model.layers", True, (
        ("SGLang `kimi_k25.py` wraps a `DeepseekV3ForCausalLM` as `language_model`; its "
         "`set_eagle3_layers_to_capture` and `get_embed_and_head` delegate to it from 0.5.10 "
         "(PR #19689); 0.5.9 and earlier define neither, so an EAGLE-3 server cannot start"),
        ("vLLM `kimi_k25.py`: the revisions read declare SupportsMultiModal and SupportsPP, not "
         "SupportsEagle3"))),
    Architecture("Qwen2_5_VLForConditionalGeneration", "model.layers", True, (
        ("SGLang `qwen2_5_vl.py` captures aux states from PR #8801, but in 0.5.5.post3 (after PR "
         "#13075) did not pass them to the logits processor, so `fc` was skipped and accept len "
         "fell to ~1; 0.5.6 passes them again (PR #13904)"),
        "vLLM `qwen2_5_vl.py` implements SupportsEagle3 (PR #22872)")),
    Architecture("Qwen3VLForConditionalGeneration", "model.language_model.layers", True),
    Architecture("Qwen3VLMoeForConditionalGeneration", "model.language_model.layers", True),
    Architecture("LlavaForConditionalGeneration", "model.language_model.layers", True),
    Architecture("Gemma3ForConditionalGeneration", "language_model.model.layers", True),
    Architecture("Mistral3ForConditionalGeneration", "language_model.model.layers", True),
)}


def lookup(config: dict) -> Architecture | None:
    """The table's entry for a raw `config.json` dict (first listed architecture it knows)."""
    for name in config.get("architectures") or []:
        if name in ARCHITECTURES:
            return ARCHITECTURES[name]
    return None


def serving_notes(arch: Architecture | None, needs=(), engine: str | None = None) -> list[str]:
    """What to check on the serving side: the table's facts for this class, then `needs`, what
    every engine needs from a target class (the engine registry's `target_needs`, passed in: this
    layer is below the engines); only the lines of the engine labelled `engine` ("SGLang") when
    it has any."""
    lines = list(arch.engines if arch else ()) + list(needs)
    if engine:
        lines = [ln for ln in lines if ln.lower().startswith(engine.lower())] or lines
    return lines


def layers_from_keys(keys) -> str | None:
    """The decoder-layer prefix the weight names use (`model.layers`, `language_model.model.layers`),
    or None when no `.layers.N.` tensor is listed (e.g. a directory with embedding and head only)."""
    import re
    pats = {re.sub(r"\.\d+\..*$", "", k) for k in keys if re.search(r"\.layers\.\d+\.", "." + k)
            and not any(t in k for t in ("vision", "visual", "audio"))}
    return min(pats, key=len) if pats else None


def _auto_mappings() -> tuple[str, str]:
    """(transformers version, the text of its auto-model mappings), read without importing it
    (importing transformers takes seconds; its `modeling_auto.py` lists every class it can build
    as ("model_type", "ClassName") pairs)."""
    import importlib.metadata
    import importlib.util
    spec = importlib.util.find_spec("transformers")
    f = Path(spec.origin).parent / "models" / "auto" / "modeling_auto.py" if spec and spec.origin else None
    text = f.read_text() if f is not None and f.is_file() else ""
    return importlib.metadata.version("transformers") if text else "(not installed)", text


def remote_code_reason(config: dict) -> str | None:
    """Why loading this config would run the checkpoint's own code, or None: transformers has no
    class of that name for that `model_type`, so only the checkpoint's `auto_map` modules could."""
    archs = config.get("architectures") or []
    if not archs:
        return None
    version, mappings = _auto_mappings()
    mt = config.get("model_type")
    if f'("{mt}", "' in mappings and any(f'"{a}"' in mappings for a in archs):
        return None
    auto = sorted({str(v) for v in (config.get("auto_map") or {}).values()})
    return (f"architectures {archs} with model_type {mt!r} are not a class transformers {version} "
            f"builds" + (f"; config.json's auto_map points at the checkpoint's own code "
                         f"({', '.join(auto)})" if auto else ""))


def layers_on_meta(config: dict) -> tuple[str | None, str]:
    """(decoder layers path, how it was found) for a class transformers ships, built on the meta
    device from the config dict (no weights allocated, no remote code); (None, why not) otherwise."""
    if not config.get("architectures"):
        return None, "no architectures in config.json"
    if remote_code_reason(config):
        return None, "not a class transformers ships (its own code would have to run)"
    import torch
    import transformers
    from transformers import AutoConfig

    from eagle_nb.model.decoder import find_decoder_layers
    name = next((a for a in config["architectures"] if hasattr(transformers, a)), None)
    if name is None:
        return None, "not a class transformers ships"
    kw = {k: v for k, v in config.items() if k not in ("model_type", "auto_map", "architectures")}
    try:
        cfg = AutoConfig.for_model(config.get("model_type"), **kw)
        with torch.device("meta"):
            model = getattr(transformers, name)(cfg)
        return find_decoder_layers(model)[0], f"transformers' {name} built on the meta device"
    except Exception as e:  # noqa: BLE001 - any failure means: cannot tell this way
        return None, f"transformers' {name} could not be built on the meta device ({type(e).__name__})"
