"""A HF `tokenizer.json` (byte-level BPE) as GGUF tokenizer metadata llama.cpp loads.

llama.cpp's own converter (`convert_hf_to_gguf.py`, `get_vocab_base_pre`) recognises a
pre-tokenizer by hashing the tokenization of a fixed text and refuses unknown ones, which stops it
on a custom tokenizer such as the shipped target's. Here the pre-tokenizer is read from the JSON:
a `ByteLevel` pre-tokenizer with `use_regex` is GPT-2's split, llama.cpp's `tokenizer.ggml.pre`
"gpt-2" (`src/llama-vocab.cpp`, LLAMA_VOCAB_PRE_TYPE_GPT2). Ids, token texts and merges are copied,
so token-id prompts and detokenisation agree with the HF tokenizer; anything else is refused with
the file and field named. Knows tokenizer files only.
"""
from __future__ import annotations

from pathlib import Path

import gguf

from eagle_nb.io.files import UserFileError, read_json_object
from eagle_nb.io.weight_files import CheckpointError


def _read(path: Path, what: str) -> dict:
    try:
        return read_json_object(path, what)
    except UserFileError as e:
        raise CheckpointError(str(e)) from None


def _pre_type(tj: dict, where: str) -> str:
    pre = tj.get("pre_tokenizer") or {}
    parts = pre.get("pretokenizers", [pre]) if pre.get("type") == "Sequence" else [pre]
    if len(parts) == 1 and parts[0].get("type") == "ByteLevel" and parts[0].get("use_regex", True) \
            and not parts[0].get("add_prefix_space", False):
        return "gpt-2"
    raise CheckpointError(f"{where}: pre_tokenizer {pre!r} is not mapped to a llama.cpp pre-tokenizer "
                          "(only a plain ByteLevel with use_regex, GPT-2's split, is); "
                          "use llama.cpp's convert_hf_to_gguf.py for this tokenizer")


def _special_ids(tj: dict, target_dir: Path) -> dict:
    """bos/eos/pad ids from tokenizer_config.json (token texts) or config.json (ids)."""
    vocab = dict(tj["model"]["vocab"])
    vocab.update({t["content"]: t["id"] for t in tj.get("added_tokens", [])})
    out = {}
    tc = target_dir / "tokenizer_config.json"
    cfg = _read(tc, "tokenizer config") if tc.is_file() else {}
    mc = _read(target_dir / "config.json", "config")
    for kind in ("bos", "eos", "pad"):
        tok = cfg.get(f"{kind}_token")
        if isinstance(tok, dict):
            tok = tok.get("content")
        if isinstance(tok, str) and tok in vocab:
            out[kind] = vocab[tok]
        elif isinstance(mc.get(f"{kind}_token_id"), int):
            out[kind] = mc[f"{kind}_token_id"]
    return out


def _adds_bos(tj: dict) -> bool:
    """True when the HF post-processor puts a special token before the text."""
    post = tj.get("post_processor") or {}
    single = post.get("single") or []
    return bool(single) and "SpecialToken" in single[0]


def add_tokenizer(w: gguf.GGUFWriter, target_dir) -> int:
    """Write the tokenizer of `target_dir` into `w`; returns the number of token ids."""
    target_dir = Path(target_dir)
    f = target_dir / "tokenizer.json"
    if not f.is_file():
        raise CheckpointError(f"{f}: missing; a GGUF needs the target's tokenizer (tokenizer.json)")
    tj = _read(f, "tokenizer")
    model = tj.get("model") or {}
    if model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise CheckpointError(f"{f}: model.type {model.get('type')!r}; only byte-level BPE is written "
                              "(use llama.cpp's convert_hf_to_gguf.py for SentencePiece models)")
    pre = _pre_type(tj, str(f))
    added = tj.get("added_tokens", [])
    n = 1 + max([*model["vocab"].values(), *(t["id"] for t in added)])
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for tok, i in model["vocab"].items():
        tokens[i], types[i] = tok, gguf.TokenType.NORMAL
    for t in added:
        tokens[t["id"]] = t["content"]
        types[t["id"]] = gguf.TokenType.CONTROL if t.get("special") else gguf.TokenType.USER_DEFINED
    merges = [" ".join(m) if isinstance(m, list) else m for m in model.get("merges", [])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = _special_ids(tj, target_dir)
    for kind, fn in (("bos", w.add_bos_token_id), ("eos", w.add_eos_token_id),
                     ("pad", w.add_pad_token_id)):
        if kind in ids:
            fn(ids[kind])
    w.add_add_bos_token(_adds_bos(tj))
    w.add_add_eos_token(False)
    return n
