"""What the doctor's static part needs from a target, read without loading it: its text config,
its architectures, its weight names and, on demand, its input embedding.

A checkpoint directory (or a cached hub id) is read through `io.target_parts` (the one reader of a
target's files: nested text configs, shard indexes, size caps, lazy tensors); a loaded Hugging Face
model is read from memory. Knows nothing about drafters or checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


from eagle_nb.checkpoints.stats import EMBED
from eagle_nb.io.target_parts import TargetParts, TargetPartsError, read_text_config


@dataclass
class TargetMeta:
    """What the static part needs from a target: its text config and weight names; the input
    embedding is read on demand."""
    source: str
    config: dict                          # the text config (nested `text_config` resolved)
    architectures: list[str]
    weight_keys: list[str]
    embedding_reader: object = field(default=None, repr=False)   # callable -> tensor, or a tensor
    embedding_note: str = ""              # why there is no embedding to compare, when there is none

    @property
    def num_layers(self) -> int | None:
        return self.config.get("num_hidden_layers")

    def get(self, key, default=None):
        return self.config.get(key, default)

    def embedding(self) -> dict:
        """{"embed_tokens.weight": the target's input embedding} (memory-mapped for a checkpoint
        directory, streamed by checkpoints/stats.py), or {} when it has none."""
        e = self.embedding_reader
        e = e() if callable(e) else e
        return e if isinstance(e, dict) else {} if e is None else {EMBED: e}


def target_meta(target) -> TargetMeta | None:
    """Config, weight names and a lazy embedding reader for a target given as a checkpoint
    directory, a cached hub id or a loaded HF model. The doctor's one door to the target."""
    if target is None:
        return None
    if not isinstance(target, (str, Path)):          # a loaded model
        cfg = target.config
        tcfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        keys = list(target.state_dict().keys())
        return TargetMeta(type(target).__name__, tcfg.to_dict(), list(cfg.architectures or
                          [type(target).__name__]), keys, target.get_input_embeddings().weight.detach())
    text = read_text_config(target)                 # config problems are the user's to fix: raise
    meta = TargetMeta(str(target), dict(text.raw, architectures=text.architectures or None),
                      list(text.architectures), [])
    try:
        parts = TargetParts(target)
    except TargetPartsError as e:                   # no readable weights: config-only checks
        meta.embedding_note = str(e)
        return meta
    meta.weight_keys = list(parts.weight_map)

    def read_embedding():
        try:
            return parts.embed_tokens(mapped=True)
        except TargetPartsError as e:
            meta.embedding_note = str(e)
            return None
    meta.embedding_reader = read_embedding
    return meta
