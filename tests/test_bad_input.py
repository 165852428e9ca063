"""Bad input, table-driven: each row is one malformed input a new user could give (checkpoint,
config, prompt file, CLI flag, Python API value) -> the error class and a phrase of its message.
Data-loss rows additionally hash the destination before and after: it must be untouched.

Rows run in-process where nothing can hang; where something could (a FIFO, a network lookup, an
unbounded decode) they run as a subprocess with a timeout, so a hang fails the row instead of the
suite. `test_every_row_is_fast` bounds the wall time of each row.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle_nb.checkpoints import CheckpointError, convert, load_drafter, save_drafter
from eagle_nb.targets import SHIPPED_TARGET
from helpers import target_for, tiny_drafter, tiny_features

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
FAST_S = 5.0          # an in-process refusal
CLI_S = 60            # a subprocess (python + torch import dominate on 2 shared cores)


def tree_hash(path) -> dict:
    """{relative path: sha256} of every file under `path` (or of `path` itself if it is a file)."""
    p = Path(path)
    if p.is_file():
        return {".": hashlib.sha256(p.read_bytes()).hexdigest()}
    return {str(f.relative_to(p)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(p.rglob("*")) if f.is_file()}


def cli(*args, timeout=CLI_S, cwd=None):
    return subprocess.run([sys.executable, "-m", "eagle_nb", *map(str, args)], capture_output=True,
                          text=True, env=ENV, timeout=timeout, cwd=cwd)


def leftovers(parent) -> list[str]:
    return [p.name for p in Path(parent).iterdir() if ".partial-" in p.name or ".old-" in p.name]


@pytest.fixture(scope="module")
def drafter():
    return tiny_drafter(seed=21)


@pytest.fixture(scope="module")
def target(drafter):
    return target_for(drafter)


@pytest.fixture()
def ckpt(tmp_path, drafter):
    """A good format-C drafter (carries embed_tokens, equal to the tiny target's)."""
    return save_drafter(drafter, tmp_path / "src", "speculators")


@pytest.fixture()
def own_embed(tmp_path, drafter):
    """A format-C drafter whose embed_tokens differs from the target's."""
    p = save_drafter(drafter, tmp_path / "own", "speculators")
    state = load_file(str(p / "model.safetensors"))
    state["embed_tokens.weight"] = state["embed_tokens.weight"] + 1.0
    save_file(state, str(p / "model.safetensors"))
    return p


def model_copy(tmp_path) -> Path:
    """A copy of the shipped target directory: the 'model destroyed by convert' case."""
    dst = tmp_path / "model_dir"
    shutil.copytree(SHIPPED_TARGET, dst)
    return dst


# -- data loss ---------------------------------------------------------------------------------------
DATA_LOSS = [
    # (id, make destination (tmp_path, src) -> path, how to call, phrase)
    ("dst-is-model-dir", lambda t, s: model_copy(t), lambda s, d: dict(src=s, dst=d), "is not empty"),
    ("dst-equals-src", lambda t, s: s, lambda s, d: dict(src=s, dst=d), "would destroy it"),
    ("dst-equals-src-forced", lambda t, s: s, lambda s, d: dict(src=s, dst=d, force=True),
     "would destroy it"),
    ("dst-equals-src-dotdot", lambda t, s: s, lambda s, d: dict(src=s, dst=d.parent / ".." / d.parent.name / d.name,
                                                              force=True), "would destroy it"),
    ("dst-symlink-to-src", lambda t, s: s, lambda s, d: dict(src=s, dst=_symlink(d), force=True),
     "would destroy it"),
    ("dst-contains-src-forced", lambda t, s: s, lambda s, d: dict(src=s, dst=d.parent, force=True),
     "contains"),
    ("dst-is-a-file", lambda t, s: _file(t), lambda s, d: dict(src=s, dst=d, force=True),
     "not a directory"),
]


def _symlink(d: Path) -> Path:
    link = d.parent / "link_to_src"
    if not link.exists():
        link.symlink_to(d, target_is_directory=True)
    return link


def _file(t: Path) -> Path:
    f = t / "notes.txt"
    f.write_text("keep me\n")
    return f


@pytest.mark.parametrize("case", DATA_LOSS, ids=[c[0] for c in DATA_LOSS])
def test_convert_never_destroys_a_directory(tmp_path, ckpt, case):
    """convert refuses, the destination's (and source's) files hash the same afterwards, and no
    temporary directory is left behind."""
    _, make_dst, call, phrase = case
    dst = make_dst(tmp_path, ckpt)
    before, src_before = tree_hash(dst), tree_hash(ckpt)
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match=phrase):
        convert(to="eagle", **call(ckpt, dst))
    assert time.perf_counter() - t0 < FAST_S
    assert tree_hash(dst) == before and tree_hash(ckpt) == src_before
    assert leftovers(tmp_path) == []


def test_cli_convert_into_model_dir_is_refused_and_untouched(tmp_path, ckpt):
    """The reported case: `eagle-nb convert SRC DST` where DST is a model directory."""
    dst = model_copy(tmp_path)
    before = tree_hash(dst)
    r = cli("convert", ckpt, dst, "--to", "eagle")
    assert r.returncode == 2 and "is not empty" in r.stderr and "--force" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert tree_hash(dst) == before
    src_before = tree_hash(ckpt)
    r = cli("convert", ckpt, ckpt, "--to", "eagle", "--force")
    assert r.returncode == 2 and "would destroy it" in r.stderr
    assert tree_hash(ckpt) == src_before


def test_error_midway_leaves_nothing_half_written(tmp_path, ckpt, monkeypatch):
    """A failure while writing (here: the safetensors writer raises) leaves a forced destination
    exactly as it was and removes the temporary directory; a new destination does not appear."""
    import safetensors.torch as st

    def boom(*a, **k):
        raise OSError("disk full (simulated)")
    monkeypatch.setattr(st, "save_file", boom)
    dst = model_copy(tmp_path)
    before = tree_hash(dst)
    with pytest.raises(OSError, match="disk full"):
        convert(ckpt, dst, "eagle", force=True)
    assert tree_hash(dst) == before and leftovers(tmp_path) == []
    with pytest.raises(OSError, match="disk full"):
        convert(ckpt, tmp_path / "new", "eagle")
    assert not (tmp_path / "new").exists() and leftovers(tmp_path) == []


def test_force_replaces_and_empty_dir_is_fine(tmp_path, ckpt, drafter, target):
    """--force replaces a non-empty directory entirely (old files gone); an existing empty
    directory needs no --force; both load back to the same drafter."""
    dst = model_copy(tmp_path)
    convert(ckpt, dst, "eagle", force=True)
    assert sorted(p.name for p in dst.iterdir()) == ["config.json", "model.safetensors"]
    empty = tmp_path / "empty"
    empty.mkdir()
    convert(ckpt, empty, "speculators")
    ids, feats = tiny_features(drafter, B=1, T=5)
    for p in (dst, empty):
        got = load_drafter(p, target=target)(ids, feats)[0]
        assert torch.equal(got, drafter(ids, feats)[0])
    assert leftovers(tmp_path) == []


# -- embed_tokens carried by the source ---------------------------------------------------------------
def test_own_embedding_is_kept_in_eagle_format(tmp_path, own_embed, target):
    """Source with its own embed_tokens -> format A keeps it (stored, loaded back instead of the
    target's), and the notes say so."""
    notes = []
    out = convert(own_embed, tmp_path / "a", "eagle", target=target, notes=notes)
    assert "embed_tokens.weight" in load_file(str(out / "model.safetensors"))
    assert any("stored, the source's own" in n for n in notes)
    want = load_file(str(own_embed / "model.safetensors"))["embed_tokens.weight"]
    assert torch.equal(load_drafter(out, target=target).embed_tokens.weight, want)


def test_own_embedding_to_sglang_needs_explicit_flag(tmp_path, own_embed, target):
    """Format B (SGLang replaces a drafter's embedding): refused with the reason, nothing written;
    with drop_embed the output omits it and the notes say the target's will be used."""
    with pytest.raises(CheckpointError, match="SGLang replaces"):
        convert(own_embed, tmp_path / "b", "sglang", target=target)
    assert not (tmp_path / "b").exists() and leftovers(tmp_path) == []
    notes = []
    out = convert(own_embed, tmp_path / "b", "sglang", target=target, drop_embed=True, notes=notes)
    assert "embed_tokens.weight" not in load_file(str(out / "model.safetensors"))
    assert any("NOT stored" in n and "TARGET's" in n for n in notes)


def test_cli_convert_says_what_happened_to_embed(tmp_path, own_embed):
    r = cli("convert", own_embed, tmp_path / "b", "--to", "sglang")
    assert r.returncode == 2 and "--drop-embed" in r.stderr
    r = cli("convert", own_embed, tmp_path / "b", "--to", "sglang", "--drop-embed")
    assert r.returncode == 0 and "NOT stored (--drop-embed)" in r.stdout, r.stderr
