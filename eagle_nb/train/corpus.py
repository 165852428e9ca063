"""The offline training corpus for the shipped target: Python source files of the standard library.

Knows how to list, split (by file, deterministically), read and pack the files, and how to train the
byte-level BPE tokenizer on the training split. It knows nothing about models; user prompt files
are read by io/prompts.py.

The split is by file path (a hash), so evaluation prompts come from files the model never saw.
"""
from __future__ import annotations

import hashlib
import json
import sysconfig
from pathlib import Path

EOS = "<|endoftext|>"
VAL_FRACTION = 0.05
MAX_FILE_BYTES = 400_000  # skip generated tables


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def list_files(root: Path | None = None) -> list[Path]:
    """All readable .py files under the standard library, sorted, site-packages excluded."""
    root = Path(root or stdlib_root())
    out = []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if "site-packages" in rel or "dist-packages" in rel or p.stat().st_size > MAX_FILE_BYTES:
            continue
        out.append(p)
    return out


def is_heldout(rel_path: str) -> bool:
    """Deterministic per-file split: ~5% of files are held out (never trained on)."""
    h = int(hashlib.sha256(rel_path.encode()).hexdigest()[:8], 16)
    return (h % 10_000) < VAL_FRACTION * 10_000


def read_text(p: Path) -> str | None:
    try:
        return p.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def split_files(root: Path | None = None) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Returns (train, heldout) lists of (relative path, text)."""
    root = Path(root or stdlib_root())
    train, held = [], []
    for p in list_files(root):
        text = read_text(p)
        if not text or not text.strip():
            continue
        rel = p.relative_to(root).as_posix()
        (held if is_heldout(rel) else train).append((rel, text))
    return train, held


def train_tokenizer(texts: list[str], vocab_size: int, out_dir: Path):
    """Byte-level BPE (exact round trip), saved in HF format so AutoTokenizer loads it offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=True)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS,
                                   unk_token=None, pad_token=EOS, clean_up_tokenization_spaces=False)
    fast.save_pretrained(out_dir)
    # transformers 5 writes its own class name ("TokenizersBackend"); the generic fast class
    # loads in both transformers 4 and 5.
    cfg_path = Path(out_dir) / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")
    return fast


def encode_files(tokenizer, files: list[tuple[str, str]]) -> list[int]:
    """Concatenate files, each followed by EOS, into one id stream."""
    eos = tokenizer.convert_tokens_to_ids(EOS)
    ids: list[int] = []
    for _, text in files:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(eos)
    return ids


def make_prompts(files: list[tuple[str, str]], n: int, max_chars: int = 240) -> list[dict]:
    """Evaluation prompts from held-out files: up to six lines of context and a `def` line, cut
    before its newline. Deterministic: the first suitable `def` of each file, in file order."""
    prompts = []
    for rel, text in files:
        lines = text.splitlines(keepends=True)
        for i, line in enumerate(lines):
            s = line.lstrip()
            if s.startswith("def ") and line.rstrip().endswith(":") and i >= 2:
                start = max(0, i - 6)
                # NOTE: no trailing newline: BPE merges "\n" with the next line's indentation,
                # so a prompt ending in a bare "\n" is a token boundary the model rarely saw.
                chunk = "".join(lines[start:i + 1]).rstrip("\n")
                if len(chunk) <= max_chars and chunk.strip():
                    prompts.append({"prompt": chunk, "source": rel, "line": start + 1})
                    break
        if len(prompts) >= n:
            break
    return prompts


def write_jsonl(rows: list[dict], path: Path) -> None:
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
