"""The parts of a target a drafter needs, read without loading the target: its text config, its
input embedding and its `lm_head`, straight from the checkpoint files.

Works on a Hugging Face checkpoint directory: `config.json` (the text config is found inside
multimodal configs: `text_config`, `language_config`, `llm_config`, ...) plus `model.safetensors`
or shards listed in `model.safetensors.index.json` (also `pytorch_model.bin[.index.json]`, read
with `torch.load(weights_only=True, mmap=True)`). Only tensor headers are read until a tensor is
asked for, and then only that tensor: a 1T-parameter target costs its embedding, never its layers.
No tokenizer, no model class, no remote code.

Knows nothing about drafters; checkpoints/load.py and the CLI ask it for shapes and tensors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from eagle_nb.io.files import UserFileError, read_json_object
from eagle_nb.io.hub import cached_snapshot
from eagle_nb.io.lazy_weights import CHUNK_BYTES, WeightFile
from eagle_nb.io.weight_files import CheckpointError

# Sub-config keys under which multimodal configs keep their text decoder's config, most common first.
TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config", "text_model_config",
                    "language_model_config", "thinker_config")
# Name endings of an input embedding / output head inside a state dict.
EMBED_SUFFIXES = ("embed_tokens.weight", "wte.weight", "embed_in.weight", "word_embeddings.weight",
                  "tok_embeddings.weight")
HEAD_SUFFIXES = ("lm_head.weight", "embed_out.weight", "output.weight")
# Parts of a multimodal checkpoint that are never the text decoder's embedding or head.
NOT_TEXT = ("vision", "visual", "image", "audio", "speech", "mm_projector", "multi_modal")


class TargetPartsError(ValueError):
    """A target's config or weights cannot give what was asked; the message names file and key."""


@dataclass
class TextConfig:
    """The target's text-decoder facts a drafter is checked against (attribute names as HF's)."""
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    tie_word_embeddings: bool | None
    model_type: str | None
    name: str                                   # where it came from: "config.json[text_config]"
    raw: dict = field(default_factory=dict, repr=False)
    architectures: list = field(default_factory=list)   # the top-level config's `architectures`


def _text_dict(cfg: dict, where: str) -> tuple[dict, str]:
    """The sub-dict holding the text decoder's config, searched one level of nesting at a time."""
    need = ("vocab_size", "hidden_size", "num_hidden_layers")
    if all(k in cfg for k in need):
        return cfg, where
    for key in TEXT_CONFIG_KEYS:
        sub = cfg.get(key)
        if isinstance(sub, dict):
            return _text_dict(sub, f"{where}[{key}]")
    subs = [k for k, v in cfg.items() if isinstance(v, dict)]
    raise TargetPartsError(
        f"{where}: no text config with {list(need)} (missing {[k for k in need if k not in cfg]}); "
        f"looked under {list(TEXT_CONFIG_KEYS)}; nested sections present: {subs}")


def resolve(path) -> Path:
    """A checkpoint directory, or a hub id 'org/name' found in the local Hugging Face cache
    (never downloaded; io/hub.py); otherwise the path as given."""
    p = Path(path)
    return p if p.is_dir() else (cached_snapshot(path) or p)


def _json(f: Path, what: str) -> dict:
    """A config / index JSON object, read with files.py's checks (regular file, size cap, UTF-8)."""
    try:
        return read_json_object(f, what)
    except UserFileError as e:
        raise TargetPartsError(str(e)) from None


def read_text_config(path) -> TextConfig:
    """The text decoder's config of the target checkpoint directory `path`."""
    f = resolve(path) / "config.json"
    if not f.exists():
        raise TargetPartsError(f"target {path}: no config.json (expected a Hugging Face checkpoint directory)")
    cfg = _json(f, "target config")
    d, where = _text_dict(cfg, str(f))
    tie = d.get("tie_word_embeddings", cfg.get("tie_word_embeddings"))
    try:
        return TextConfig(int(d["vocab_size"]), int(d["hidden_size"]), int(d["num_hidden_layers"]),
                          None if tie is None else bool(tie), d.get("model_type") or cfg.get("model_type"),
                          where, d, list(cfg.get("architectures") or []))
    except (TypeError, ValueError) as e:
        raise TargetPartsError(f"{where}: vocab_size/hidden_size/num_hidden_layers must be integers ({e})") from None


class TargetParts:
    """Lazy access to one target checkpoint directory: `config`, `shape(key)`, `tensor(key)`,
    `embed_tokens()`, `lm_head()`. Tensors are read one at a time from memory-mapped files."""

    def __init__(self, path):
        self.path = resolve(path)
        if not self.path.is_dir():
            raise TargetPartsError(f"target {path}: not a directory")
        self.config = read_text_config(self.path)
        self._shapes: dict[str, tuple] = {}
        self._bins: dict[str, dict] = {}
        self._files: dict[str, WeightFile] = {}
        self.weight_map = self._weight_map()              # key -> file name

    def __repr__(self) -> str:
        return f"TargetParts({str(self.path)!r}, {len(self.weight_map)} tensors)"

    # -- files -------------------------------------------------------------------------------------
    def _weight_map(self) -> dict[str, str]:
        p = self.path
        for index, single in (("model.safetensors.index.json", "model.safetensors"),
                              ("pytorch_model.bin.index.json", "pytorch_model.bin")):
            if (p / index).exists():
                wm = _json(p / index, "target weight index").get("weight_map")
                if not isinstance(wm, dict):
                    raise TargetPartsError(f"{p / index}: no readable 'weight_map' (found {type(wm).__name__})")
                missing = sorted({f for f in wm.values() if not (p / f).exists()})
                if missing:
                    raise TargetPartsError(f"{p / index}: lists shard files that do not exist: {missing[:5]}")
                return dict(wm)
            if (p / single).exists():
                return {k: single for k in self._keys_of(single)}
        raise TargetPartsError(f"target {p}: no weights (looked for model.safetensors[.index.json], "
                               f"pytorch_model.bin[.index.json])")

    def _keys_of(self, name: str) -> list[str]:
        if name.endswith(".safetensors"):
            from safetensors import safe_open
            try:
                with safe_open(str(self.path / name), "pt") as f:
                    return list(f.keys())
            except Exception as e:  # noqa: BLE001 - a corrupt header is the user's file fault
                raise TargetPartsError(f"{self.path / name}: unreadable safetensors header: {e}") from None
        return list(self._bin(name))

    def _bin(self, name: str) -> dict:
        if name not in self._bins:
            f = self.path / name
            try:   # mmap: tensors stay on disk until touched; weights_only: never runs code
                self._bins[name] = torch.load(f, map_location="cpu", weights_only=True, mmap=True)
            except Exception as e:  # noqa: BLE001
                raise TargetPartsError(f"{f}: refused or unreadable with weights_only=True, mmap=True "
                                       f"({type(e).__name__}: {str(e)[:200]})") from None
        return self._bins[name]

    def _weight_file(self, key: str) -> WeightFile:
        name = self._file_of(key)
        if name not in self._files:
            try:
                self._files[name] = WeightFile(self.path / name)
            except CheckpointError as e:
                raise TargetPartsError(str(e)) from None
        return self._files[name]

    def mapped(self, key: str) -> torch.Tensor:
        """`key` as a memory-mapped view: nothing is read until touched (an embedding lookup
        reads only the rows it takes); writes stay private."""
        return self._weight_file(key).tensor(key)

    def nbytes(self, key: str) -> int:
        """Size of `key`'s data in its file, from the header."""
        return self._weight_file(key).entries[key].nbytes

    def chunks(self, key: str, max_bytes: int = CHUNK_BYTES):
        """`key` flattened, in copies of at most `max_bytes`, read from its file."""
        return self._weight_file(key).chunks(key, max_bytes)

    def _file_of(self, key: str) -> str:
        if key not in self.weight_map:
            raise TargetPartsError(f"target {self.path}: no tensor {key!r} in its weights")
        return self.weight_map[key]

    # -- tensors -----------------------------------------------------------------------------------
    def shape(self, key: str) -> tuple[int, ...]:
        """Shape of `key` from the file header only."""
        if key not in self._shapes:
            name = self._file_of(key)
            if name.endswith(".safetensors"):
                from safetensors import safe_open
                with safe_open(str(self.path / name), "pt") as f:
                    self._shapes[key] = tuple(f.get_slice(key).get_shape())
            else:
                self._shapes[key] = tuple(self._bin(name)[key].shape)
        return self._shapes[key]

    def tensor(self, key: str) -> torch.Tensor:
        """The one tensor `key` (a copy in memory; nothing else of its shard is read)."""
        name = self._file_of(key)
        if name.endswith(".safetensors"):
            from safetensors import safe_open
            try:
                with safe_open(str(self.path / name), "pt") as f:
                    return f.get_tensor(key)
            except Exception as e:  # noqa: BLE001
                raise TargetPartsError(f"{self.path / name}: cannot read {key!r}: {e}") from None
        return self._bin(name)[key].clone()

    def _find(self, suffixes, what: str) -> str | None:
        """The text decoder's tensor among keys ending in `suffixes`, shaped (vocab, hidden)."""
        c = self.config
        want = (c.vocab_size, c.hidden_size)
        cands = [k for k in self.weight_map if k.endswith(suffixes)
                 and not any(t in k.lower() for t in NOT_TEXT)]
        fits = [k for k in cands if self.shape(k) == want]
        if len(fits) > 1:   # e.g. an MTP head's own embedding: take the shortest (outermost) name
            fits.sort(key=lambda k: (k.count("."), k))
            if fits[0].count(".") == fits[1].count("."):
                raise TargetPartsError(f"target {self.path}: several {what} candidates {fits} of shape "
                                       f"{want}; cannot tell which is the text decoder's")
        if fits:
            return fits[0]
        if cands:
            raise TargetPartsError(
                f"target {self.path}: {what} candidates {[(k, self.shape(k)) for k in cands]} do not "
                f"have shape (vocab_size, hidden_size) = {want} from {c.name}")
        return None

    def embed_key(self) -> str:
        k = self._find(EMBED_SUFFIXES, "input embedding")
        if k is None:
            raise TargetPartsError(f"target {self.path}: no input embedding among its "
                                   f"{len(self.weight_map)} tensors (looked for names ending in {list(EMBED_SUFFIXES)})")
        return k

    def head_key(self) -> str:
        """Key of the output head; the embedding's key when the target ties them."""
        k = self._find(HEAD_SUFFIXES, "lm_head")
        if k is not None:
            return k
        if self.config.tie_word_embeddings is False:
            raise TargetPartsError(f"target {self.path}: no lm_head tensor (looked for {list(HEAD_SUFFIXES)}) "
                                   f"and {self.config.name} says tie_word_embeddings=false")
        return self.embed_key()          # tied (explicitly, or by the HF default when unset)

    def embed_tokens(self, mapped: bool = False) -> torch.Tensor:
        """(vocab_size, hidden_size) input embedding: a copy, or with `mapped` a memory-mapped
        view of the target's file."""
        return self.mapped(self.embed_key()) if mapped else self.tensor(self.embed_key())

    def lm_head(self) -> torch.Tensor:
        """(vocab_size, hidden_size) output head (the embedding when tied)."""
        return self.tensor(self.head_key())

    @property
    def name(self) -> str:
        return self.path.name
