"""Bad input, table-driven: each row is one malformed input a new user could give (checkpoint,
config, prompt file, CLI flag, Python API value) -> the error class and a phrase of its message.
Data-loss rows additionally hash the destination before and after: it must be untouched.

Rows run in-process under a 30 s SIGALRM watchdog (it interrupts a blocking open() of a FIFO), and
each must be refused within FAST_S CPU seconds; the FIFO cases also run end to end as a
subprocess with a timeout, so a hang fails a test instead of the suite.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.checkpoints.convert import convert
from eagle_nb.checkpoints.save import save_drafter
from eagle_nb.checkpoints.load import load_drafter
from eagle_nb.io.paths import CODE_TARGET
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
    shutil.copytree(CODE_TARGET, dst)
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
    cpu0 = time.process_time()
    with pytest.raises(CheckpointError, match=phrase):
        convert(to="eagle", **call(ckpt, dst))
    assert time.process_time() - cpu0 < FAST_S
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
    """A failure while writing (here: the disk fills after two tensors of the streamed file)
    leaves a forced destination exactly as it was and removes the temporary directory; a new
    destination does not appear."""
    import eagle_nb.checkpoints.convert as cv
    from eagle_nb.io.stream_write import Planned
    real = cv.write_safetensors

    def full_disk():
        yield from ()
        raise OSError("disk full (simulated)")

    def boom(path, planned, *a, **k):
        p = planned[2]
        return real(path, [*planned[:2], Planned(p.name, p.dtype, p.shape, full_disk), *planned[3:]], *a, **k)
    monkeypatch.setattr(cv, "write_safetensors", boom)
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


def test_fp16_copy_of_the_target_embedding_counts_as_the_targets(tmp_path, drafter, target):
    """A drafter that stores the target's embedding rounded to fp16 (the shipped one does) is
    converted to format B with --target: equal at the source's precision, so not stored."""
    p = save_drafter(drafter, tmp_path / "h", "speculators", dtype=torch.float16)
    notes = []
    out = convert(p, tmp_path / "b", "sglang", target=target, notes=notes)
    assert "embed_tokens.weight" not in load_file(str(out / "model.safetensors"))
    assert "float16 precision" in notes[0]


def test_cli_convert_says_what_happened_to_embed(tmp_path, own_embed):
    r = cli("convert", own_embed, tmp_path / "b", "--to", "sglang")
    assert r.returncode == 2 and "--drop-embed" in r.stderr
    r = cli("convert", own_embed, tmp_path / "b", "--to", "sglang", "--drop-embed")
    assert r.returncode == 0 and "NOT stored (--drop-embed)" in r.stdout, r.stderr


# =====================================================================================================
# The table: one row per bad input -> (error class, phrase of the message). Each row runs under a
# SIGALRM watchdog (a blocking open() of a FIFO is interrupted) and must be refused in FAST_S.
# =====================================================================================================
import json  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402

from eagle_nb.model.config import ConfigError, DrafterConfig, SpecConfig  # noqa: E402
from eagle_nb.io.files import UserFileError  # noqa: E402
from eagle_nb.model.limits import ContextError, ContextWarning, encode  # noqa: E402
from eagle_nb.report.params import ParamError  # noqa: E402
from eagle_nb.io.prompts import PromptError, check_prompts, read_prompts  # noqa: E402
from eagle_nb.model.targets import TargetError  # noqa: E402


class Ctx:
    """What a row needs: a scratch directory, good checkpoints to damage, the tiny target."""

    def __init__(self, tmp: Path, drafter, target):
        self.tmp, self.drafter, self.target = tmp, drafter, target
        self._n = 0

    def good(self, fmt="eagle") -> Path:
        self._n += 1
        return save_drafter(self.drafter, self.tmp / f"{fmt}_{self._n}", fmt)

    def fifo(self, path: Path) -> Path:
        if path.exists() or path.is_symlink():
            path.unlink()
        os.mkfifo(path)
        return path


def _loop(tmp: Path) -> Path:
    """Two symbolic links pointing at each other; returns one."""
    a, b = tmp / "loop_a", tmp / "loop_b"
    a.symlink_to(b)
    b.symlink_to(a)
    return a


def _dangling(tmp: Path) -> Path:
    link = tmp / "dangling"
    link.symlink_to(tmp / "gone")
    return link


def _cfg(fmt, edit):
    """Load a good checkpoint of `fmt` whose config.json was changed by `edit(dict)`."""
    def run(c: Ctx):
        p = c.good(fmt)
        cfg = json.loads((p / "config.json").read_text())
        edit(cfg["transformer_layer_config"] if fmt == "speculators" and "__top" not in edit.__name__
             else cfg)
        (p / "config.json").write_text(json.dumps(cfg))
        load_drafter(p, target=c.target)
    return run


def _set(key, value):
    def edit(d):
        d[key] = value
    return edit


def _top(key, value):
    def edit__top(d):
        d[key] = value
    return edit__top


def _cfg_file(make):
    """config.json replaced by `make(path_of_config_json, ctx)`."""
    def run(c: Ctx):
        p = c.good()
        (p / "config.json").unlink()
        make(p / "config.json", c)
        load_drafter(p, target=c.target)
    return run


def _weights(edit=None, make=None, fmt="eagle"):
    """Load a good checkpoint whose state dict was changed by `edit(dict)`, or whose weights
    file was replaced by `make(dir, ctx)`."""
    def run(c: Ctx):
        p = c.good(fmt)
        if edit is not None:
            state = load_file(str(p / "model.safetensors"))
            edit(state)
            save_file({k: v.contiguous() for k, v in state.items()}, str(p / "model.safetensors"))
        if make is not None:
            make(p, c)
        load_drafter(p, target=c.target)
    return run


def _bin(obj):
    def make(p, c):
        (p / "model.safetensors").unlink()
        torch.save(obj, p / "pytorch_model.bin")
    return make


def _sharded(edit_index=None, drop_shard=False, drop_key=None):
    def make(p, c):
        state = load_file(str(p / "model.safetensors"))
        (p / "model.safetensors").unlink()
        keys = sorted(state)
        halves = {"model-00001-of-00002.safetensors": keys[::2], "model-00002-of-00002.safetensors": keys[1::2]}
        for name, ks in halves.items():
            save_file({k: state[k] for k in ks if k != drop_key}, str(p / name))
        index = {"metadata": {}, "weight_map": {k: n for n, ks in halves.items() for k in ks}}
        if edit_index:
            index = edit_index(index)
        (p / "model.safetensors.index.json").write_text(json.dumps(index))
        if drop_shard:
            (p / "model-00002-of-00002.safetensors").unlink()
    return make


def _prompts(content: bytes | None = None, make=None):
    def run(c: Ctx):
        f = c.tmp / "prompts.jsonl"
        if make is not None:
            make(f, c)
        else:
            f.write_bytes(content)
        read_prompts(f)
    return run


def _sparse(size):
    def make(f, c):
        with open(f, "wb") as h:
            h.truncate(size)
    return make


def _mkdir(f, c):
    f.mkdir()


def _fifo(f, c):
    c.fifo(f)


def _cli(*args):
    """In-process CLI: SystemExit(2) with the message on stderr becomes a CliError."""
    def run(c: Ctx):
        from eagle_nb.cli.main import main
        import contextlib
        import io
        err = io.StringIO()
        argv = [str(a).replace("{tmp}", str(c.tmp)) for a in args]
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                main(argv)
            except SystemExit as e:
                if e.code not in (0, None):
                    lines = [ln for ln in err.getvalue().splitlines() if "error:" in ln]
                    raise CliError("\n".join(lines) or err.getvalue()) from None
                return
    return run


class CliError(Exception):
    """The CLI exited non-zero; the message is what it printed on stderr."""


def _gen(ids=None, **kw):
    def run(c: Ctx):
        from eagle_nb.loop.chain import generate
        x = ids(c) if callable(ids) else (torch.tensor([[1, 2, 3]]) if ids is None else ids)
        generate(c.target, c.drafter, x, layer_ids=[2, 4, 5], **kw)
    return run


def _greedy(ids, **kw):
    def run(c: Ctx):
        from eagle_nb.loop.chain import greedy_reference
        greedy_reference(c.target, ids, **kw)
    return run


def _capture(ids, n_tokens: int = 3):
    """capture() on the tiny target (64 positions) over `n_tokens` tokens; a ContextWarning is
    raised as an error so that the row sees it."""
    def run(c: Ctx):
        import warnings

        from eagle_nb.model.capture import capture
        with warnings.catch_warnings():
            warnings.simplefilter("error", ContextWarning)
            with torch.no_grad(), capture(c.target, ids):
                c.target(torch.ones(1, n_tokens, dtype=torch.long))
    return run


def _record(prompt, **kw):
    def run(c: Ctx):
        from eagle_nb.recordings.recording import record
        record(c.target, [prompt], c.tmp / "rec", [2, 4, 5], progress=False, **kw)
        assert not (c.tmp / "rec").exists()
    return run


def _write(name, text: str | bytes):
    def make(c: Ctx) -> Path:
        f = c.tmp / name
        f.write_bytes(text if isinstance(text, bytes) else text.encode())
        return f
    return make


CE, UE = CheckpointError, UserFileError
LONG = "x = 1\n" * 3000           # far more tokens than the shipped target's 1024 positions
ROWS = [
    # -- drafter config.json: types and ranges, each naming the field -----------------------------
    ("cfg-hidden_size-string", _cfg("eagle", _set("hidden_size", "32")), CE, "hidden_size must be an integer, got '32'"),
    ("cfg-hidden_size-zero", _cfg("eagle", _set("hidden_size", 0)), CE, "hidden_size must be >= 1"),
    ("cfg-hidden_size-bool", _cfg("eagle", _set("hidden_size", True)), CE, "hidden_size must be an integer"),
    ("cfg-hidden_size-float", _cfg("eagle", _set("hidden_size", 32.0)), CE, "hidden_size must be an integer"),
    ("cfg-heads-string", _cfg("eagle", _set("num_attention_heads", "4")), CE, "num_attention_heads must be an integer"),
    ("cfg-kv-heads-not-dividing", _cfg("eagle", _set("num_key_value_heads", 3)), CE, "num_key_value_heads 3 does not divide"),
    ("cfg-kv-heads-zero", _cfg("eagle", _set("num_key_value_heads", 0)), CE, "num_key_value_heads must be >= 1"),
    ("cfg-intermediate-negative", _cfg("eagle", _set("intermediate_size", -64)), CE, "intermediate_size must be >= 1"),
    ("cfg-vocab-null", _cfg("eagle", _set("vocab_size", None)), CE, "missing required field(s) ['vocab_size']"),
    ("cfg-draft-vocab-string", _cfg("eagle", _set("draft_vocab_size", "64")), CE, "draft_vocab_size must be an integer"),
    ("cfg-draft-vocab-too-big", _cfg("eagle", _set("draft_vocab_size", 999)), CE, "draft_vocab_size 999 > vocab_size"),
    ("cfg-rms_norm_eps-string", _cfg("eagle", _set("rms_norm_eps", "1e-5")), CE, "rms_norm_eps must be a number, got '1e-5'"),
    ("cfg-rms_norm_eps-zero", _cfg("eagle", _set("rms_norm_eps", 0)), CE, "rms_norm_eps must be > 0"),
    ("cfg-rms_norm_eps-negative", _cfg("eagle", _set("rms_norm_eps", -1e-6)), CE, "rms_norm_eps must be > 0"),
    ("cfg-rope_theta-negative", _cfg("eagle", _set("rope_theta", -1)), CE, "rope_theta must be > 0"),
    ("cfg-rope_theta-zero", _cfg("eagle", _set("rope_theta", 0)), CE, "rope_theta must be > 0"),
    ("cfg-rope_theta-string", _cfg("eagle", _set("rope_theta", "10000")), CE, "rope_theta must be a number"),
    ("cfg-rope_parameters-string", _cfg("eagle", lambda d: (d.pop("rope_theta"), d.__setitem__("rope_parameters", "x"))), CE, "rope_parameters must be an object"),
    ("cfg-rope_scaling-string", _cfg("eagle", _set("rope_scaling", "linear")), CE, "rope_scaling must be an object"),
    ("cfg-rope_scaling-yarn", _cfg("eagle", _set("rope_scaling", {"rope_type": "yarn", "factor": 2.0})), CE, "rope_scaling type 'yarn' is not supported"),
    ("cfg-hidden_act-gelu", _cfg("eagle", _set("hidden_act", "gelu")), CE, "hidden_act 'gelu' is not supported"),
    ("cfg-hidden_act-relu-speculators", _cfg("speculators", _set("hidden_act", "relu")), CE, "hidden_act 'relu' is not supported"),
    ("cfg-head_dim-odd", _cfg("eagle", _set("head_dim", 7)), CE, "head_dim 7 is odd"),
    ("cfg-head_dim-string", _cfg("eagle", _set("head_dim", "8")), CE, "head_dim must be an integer"),
    ("cfg-max_pos-string", _cfg("eagle", _set("max_position_embeddings", "2048")), CE, "max_position_embeddings must be an integer"),
    ("cfg-aux-ids-string", _cfg("eagle", _set("eagle_aux_hidden_state_layer_ids", "2,4,5")), CE, "must be a list of integers such as [2, 4, 5]"),
    ("cfg-aux-ids-duplicate", _cfg("eagle", _set("eagle_aux_hidden_state_layer_ids", [2, 2, 4])), CE, "repeats layer id(s) [2]"),
    ("cfg-aux-ids-elements-strings", _cfg("eagle", _set("eagle_aux_hidden_state_layer_ids", ["2", "4", "5"])), CE, "element '2' is a str"),
    ("cfg-aux-ids-empty", _cfg("eagle", _set("eagle_aux_hidden_state_layer_ids", [])), CE, "is empty"),
    ("cfg-aux-ids-negative", _cfg("eagle", _set("eagle_aux_hidden_state_layer_ids", [-1, 2, 4])), CE, "negative layer id"),
    ("cfg-sglang-nested-duplicate", _cfg("sglang", lambda d: d["eagle_config"].__setitem__("eagle_aux_hidden_state_layer_ids", [1, 1, 3])), CE, "eagle_config.eagle_aux_hidden_state_layer_ids [1, 1, 3] repeats"),
    ("cfg-sglang-eagle_config-string", _cfg("sglang", _set("eagle_config", "x")), CE, "eagle_config must be an object"),
    ("cfg-speculators-ids-string", _cfg("speculators", _top("eagle_aux_hidden_state_layer_ids", "2,4,5")), CE, "must be a list of integers"),
    ("cfg-speculators-no-layer-config", _cfg("speculators", _top("transformer_layer_config", None)), CE, "transformer_layer_config"),
    ("cfg-speculators-other-type", _cfg("speculators", _top("speculators_model_type", "medusa")), CE, "'medusa' is not eagle3"),
    ("cfg-flag-string", _cfg("eagle", _set("norm_before_fc", "false")), CE, "norm_before_fc must be true or false"),
    ("cfg-architectures-string", _cfg("eagle", _set("architectures", "LlamaForCausalLM")), CE, "architectures must be a list"),
    ("cfg-not-a-drafter", _cfg("eagle", lambda d: (d.pop("draft_vocab_size"), d.__setitem__("num_hidden_layers", 8))), CE, "not a recognisable EAGLE-3 drafter"),
    # -- config.json as a file --------------------------------------------------------------------------
    ("config-is-a-list", _cfg_file(lambda f, c: f.write_text("[1, 2]")), CE, "top level is a JSON list"),
    ("config-not-utf8", _cfg_file(lambda f, c: f.write_bytes(b'{"hidden_size": "\xff"}')), CE, "not UTF-8"),
    ("config-is-a-directory", _cfg_file(_mkdir), CE, "is a directory, not a regular file"),
    ("config-is-a-fifo", _cfg_file(_fifo), CE, "is a FIFO (named pipe)"),
    ("config-symlink-to-fifo", _cfg_file(lambda f, c: f.symlink_to(c.fifo(c.tmp / "pipe"))), CE, "FIFO"),
    ("config-huge", _cfg_file(_sparse(64 << 20)), CE, "over the 16 MiB limit"),
    ("config-empty", _cfg_file(lambda f, c: f.write_text("")), CE, "invalid JSON"),
    ("config-invalid-json", _cfg_file(lambda f, c: f.write_text("{'hidden_size': 32}")), CE, "invalid JSON"),
    ("config-missing", _cfg_file(lambda f, c: None), CE, "no config.json"),
    ("ckpt-path-is-a-file", lambda c: load_drafter(_write("f.safetensors", b"x")(c)), CE, "expected a checkpoint directory"),
    ("ckpt-path-missing", lambda c: load_drafter(c.tmp / "nope"), CE, "missing; expected a checkpoint directory"),
    ("ckpt-path-symlink-loop", lambda c: load_drafter(_loop(c.tmp)), CE, "a symlink loop"),
    ("ckpt-path-broken-symlink", lambda c: load_drafter(_dangling(c.tmp)), CE, "a broken symlink"),
    ("prompts-symlink-loop", lambda c: read_prompts(_loop(c.tmp) / "p.jsonl"), UE, "a symlink loop"),
    # -- weights ------------------------------------------------------------------------------------------
    ("weights-none", _weights(make=lambda p, c: (p / "model.safetensors").unlink()), CE, "no weights file"),
    ("weights-bin-list", _weights(make=_bin([torch.zeros(2)])), CE, "holds a list, expected a dict"),
    ("weights-bin-non-tensor", _weights(make=_bin({"fc.weight": 3})), CE, "are not tensors"),
    ("weights-truncated", _weights(make=lambda p, c: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes()[:500])), CE, "corrupt or truncated"),
    ("weights-int8", _weights(edit=lambda s: s.update({k: v.to(torch.int8) for k, v in s.items() if v.is_floating_point()})), CE, "quantized drafter weights are not supported"),
    ("weights-one-uint8", _weights(edit=lambda s: s.__setitem__("fc.weight", s["fc.weight"].to(torch.uint8))), CE, "'fc.weight': 'uint8'"),
    ("weights-fifo", _weights(make=lambda p, c: c.fifo(p / "model.safetensors")), CE, "FIFO"),
    ("weights-directory", _weights(make=lambda p, c: ((p / "model.safetensors").unlink(), (p / "model.safetensors").mkdir())), CE, "is a directory"),
    ("shard-missing", _weights(make=_sharded(drop_shard=True)), CE, "shard file(s) ['model-00002-of-00002.safetensors']"),
    ("shard-key-absent", _weights(make=_sharded(drop_key="fc.weight")), CE, "lacks ['fc.weight']"),
    ("shard-index-no-map", _weights(make=_sharded(edit_index=lambda i: {"metadata": {}})), CE, "no 'weight_map'"),
    ("shard-name-escapes", _weights(make=_sharded(edit_index=lambda i: {"weight_map": {k: "../x.safetensors" for k in i["weight_map"]}})), CE, "is not a file name"),
    ("shard-index-list", _weights(make=_sharded(edit_index=lambda i: [i])), CE, "top level is a JSON list"),
    # -- prompt files -------------------------------------------------------------------------------------
    ("prompts-not-utf8", _prompts(b'{"prompt": "a"}\n{"prompt": "b"}\n{"prompt": "\xe9t\xe9"}\n'), UE, "prompts.jsonl:3: not UTF-8"),
    ("prompts-invalid-json", _prompts(b'{"prompt": "a"}\n{prompt: b}\n'), PromptError, "prompts.jsonl:2: not valid JSON"),
    ("prompts-line-is-list", _prompts(b'["a"]\n'), PromptError, ":1: expected an object with a string 'prompt' field (raw text) or a 'messages' list (a chat), got list"),
    ("prompts-no-prompt-field", _prompts(b'{"text": "a"}\n'), PromptError, "with keys ['text']"),
    ("prompts-prompt-number", _prompts(b'{"prompt": 3}\n'), PromptError, "string 'prompt' field"),
    ("prompts-empty-prompt", _prompts(b'{"prompt": ""}\n'), PromptError, ":1: the prompt is empty"),
    ("prompts-empty-file", _prompts(b"\n\n"), PromptError, "no prompts found"),
    ("prompts-fifo", _prompts(make=_fifo), UE, "is a FIFO"),
    ("prompts-directory", _prompts(make=_mkdir), UE, "is a directory"),
    ("prompts-huge", _prompts(make=_sparse(300 << 20)), UE, "over the 256 MiB limit"),
    ("prompts-missing", lambda c: read_prompts(c.tmp / "nope.jsonl"), UE, "no such file"),
    # -- CLI flags (in process; refused before any model is loaded unless noted) ----------------------------
    ("cli-depth-zero", _cli("speculate", "--prompt", "x", "--depth", "0"), CliError, "depth (--depth) must be in 1..32, got 0"),
    ("cli-depth-negative", _cli("speculate", "--prompt", "x", "--depth", "-3"), CliError, "depth (--depth) must be in 1..32"),
    ("cli-depth-huge", _cli("speculate", "--prompt", "x", "--depth", "100000"), CliError, "depth (--depth) must be in 1..32"),
    ("cli-temperature-negative", _cli("speculate", "--prompt", "x", "--temperature", "-1"), CliError, "temperature (--temperature) must be >= 0.0"),
    ("cli-temperature-nan", _cli("speculate", "--prompt", "x", "--temperature", "nan"), CliError, "temperature (--temperature) must be finite"),
    ("cli-temperature-inf", _cli("speculate", "--prompt", "x", "--temperature", "inf"), CliError, "must be finite"),
    ("cli-max-new-negative", _cli("speculate", "--prompt", "x", "--max-new-tokens", "-1"), CliError, "max_new_tokens (--max-new-tokens) must be >= 1"),
    ("cli-max-new-zero", _cli("speculate", "--prompt", "x", "--max-new-tokens", "0"), CliError, "max_new_tokens (--max-new-tokens) must be >= 1"),
    ("cli-seed-negative", _cli("speculate", "--prompt", "x", "--seed", "-1"), CliError, "seed (--seed) must be >= 0"),
    ("cli-empty-prompt", _cli("speculate", "--prompt", ""), CliError, "--prompt is empty"),
    ("cli-capture-empty-prompt", _cli("capture", "--prompt", ""), CliError, "--prompt is empty"),
    ("cli-device-cuda-without-cuda", _cli("speculate", "--prompt", "x", "--device", "cuda"), CliError, "CUDA is not available"),
    ("cli-device-unknown", _cli("speculate", "--prompt", "x", "--device", "gpu"), CliError, "is not a device name torch knows"),
    ("cli-target-missing-hub-like", _cli("speculate", "--prompt", "x", "--target", "no_such/target"), CliError, "not in the local Hugging Face cache"),
    ("cli-target-missing-path", _cli("speculate", "--prompt", "x", "--target", "{tmp}/nope"), CliError, "no such directory (looked for"),
    ("cli-target-is-a-file", _cli("speculate", "--prompt", "x", "--target", str(CODE_TARGET / "config.json")), CliError, "is a file; expected a Hugging Face checkpoint directory"),
    ("cli-target-dir-without-config", _cli("capture", "--prompt", "x", "--target", "{tmp}"), CliError, "no config.json"),
    ("cli-target-tokenizer-fifo", lambda c: (shutil.copytree(CODE_TARGET, c.tmp / "t"), (c.tmp / "t" / "tokenizer.json").unlink(), c.fifo(c.tmp / "t" / "tokenizer.json"), _cli("capture", "--prompt", "x", "--target", c.tmp / "t")(c)), CliError, "tokenizer.json is not a regular file"),
    ("cli-target-config-list", lambda c: (shutil.copytree(CODE_TARGET, c.tmp / "t"), (c.tmp / "t" / "config.json").write_text("[]"), _cli("capture", "--prompt", "x", "--target", c.tmp / "t")(c)), CliError, "top level is a JSON list"),
    ("cli-inspect-target-missing", _cli("inspect", str(REPO / "data" / "drafter_eagle"), "--target", "no_such/target"), CliError, "not in the local Hugging Face cache"),
    ("cli-prompts-not-utf8", lambda c: _cli("speculate", "--prompts", _write("bad.jsonl", b'{"prompt": "ok"}\n{"prompt": "\xff"}\n')(c))(c), CliError, "bad.jsonl:2: not UTF-8"),
    ("cli-prompts-fifo", lambda c: _cli("speculate", "--prompts", c.fifo(c.tmp / "pipe"))(c), CliError, "is a FIFO"),
    ("cli-prompt-longer-than-context", _cli("speculate", "--prompt", LONG, "--max-new-tokens", "4"), CliError, "max_position_embeddings is 8192"),
    ("cli-max-new-beyond-context", _cli("speculate", "--prompt", "x", "--max-new-tokens", "100000000"), CliError, "does not fit the target's context (max_position_embeddings is 8192)"),
    ("cli-capture-prompt-too-long", _cli("capture", "--prompt", LONG), CliError, "max_position_embeddings is 8192"),
    ("cli-param-without-equals", _cli("report", "--out", "{tmp}/r", "--param", "depth"), CliError, "expected KEY=VALUE"),
    ("cli-param-misspelt", _cli("report", "--out", "{tmp}/r", "--param", "dept=3"), CliError, "did you mean 'depth'"),
    ("cli-param-bad-depth", _cli("report", "--out", "{tmp}/r", "--param", "depth=0"), CliError, "depth (--depth) must be in 1..32"),
    ("cli-param-bad-temperatures", _cli("report", "--out", "{tmp}/r", "--param", "temperatures=[0.0, -1.0]"), CliError, "temperature (--temperature) must be >= 0.0"),
    ("cli-param-depths-not-list", _cli("report", "--out", "{tmp}/r", "--param", "depths=4"), CliError, "expected a non-empty list"),
    ("cli-param-n_prompts-string", _cli("report", "--out", "{tmp}/r", "--param", "n_prompts=many"), CliError, "n_prompts='many'"),
    ("cli-param-prompts-missing", _cli("report", "--out", "{tmp}/r", "--param", "prompts_path={tmp}/nope.jsonl"), CliError, "no such file"),
    ("cli-param-drafter-missing", _cli("report", "--out", "{tmp}/r", "--param", "drafter_path={tmp}/nope"), CliError, "no such checkpoint directory"),
    ("cli-param-dtype-int8", _cli("report", "--out", "{tmp}/r", "--param", "dtype=int8"), CliError, "choose one of"),
    ("cli-param-device-cuda", _cli("report", "--out", "{tmp}/r", "--param", "device=cuda"), CliError, "CUDA is not available"),
    ("cli-param-for-other-notebook", _cli("report", "--out", "{tmp}/r", "--notebook", "01", "--param", "temperatures=[1.0]"), CliError, "no such parameter in ['01_load_checkpoints']"),
    ("cli-out-is-a-file", lambda c: _cli("report", "--out", _write("out.txt", "x")(c))(c), CliError, "is a file; give a directory"),
    ("cli-out-is-notebooks", _cli("report", "--out", str(REPO / "notebooks")), CliError, "the source notebooks folder"),
    ("cli-convert-unknown-source", _cli("convert", "{tmp}/nope", "{tmp}/out", "--to", "eagle"), CliError, "missing; expected a checkpoint directory"),
    # -- Python API ---------------------------------------------------------------------------------------
    ("api-ids-generator", _gen(lambda c: (i for i in [1, 2, 3])), TypeError, "got generator"),
    ("api-ids-int", _gen(5), TypeError, "got int"),
    ("api-ids-string", _gen("def f"), TypeError, "got str"),
    ("api-ids-float-tensor", _gen(torch.tensor([[1.0, 2.0]])), TypeError, "integer token ids"),
    ("api-ids-empty", _gen(torch.zeros(1, 0, dtype=torch.long)), ValueError, "empty prompt"),
    ("api-ids-empty-list", _gen([]), ValueError, "empty prompt"),
    ("api-ids-batch", _gen(torch.ones(2, 3, dtype=torch.long)), ValueError, "one prompt at a time"),
    ("api-ids-out-of-vocab", _gen(torch.tensor([[1, 5000]])), ValueError, "outside the target vocabulary 0..127"),
    ("api-ids-negative", _gen(torch.tensor([[-1, 2]])), ValueError, "outside the target vocabulary"),
    ("api-depth-zero", _gen(depth=0), ConfigError, "depth (--depth) must be in 1..32"),
    ("api-temperature-negative", _gen(temperature=-0.5), ConfigError, "temperature (--temperature) must be >= 0.0"),
    ("api-temperature-nan", _gen(temperature=math.nan), ConfigError, "must be finite"),
    ("api-max-new-float", _gen(max_new_tokens=1e8), ConfigError, "max_new_tokens (--max-new-tokens) must be an integer"),
    ("api-max-new-beyond-context", _gen(max_new_tokens=10**8), ContextError, "max_position_embeddings is 64"),
    ("api-prompt-beyond-context", _gen(torch.ones(1, 70, dtype=torch.long), max_new_tokens=4), ContextError, "is 70 tokens"),
    ("api-capture-layer-ids-int", _capture(5), TypeError, "got int 5; for one layer pass [5]"),
    ("api-capture-layer-ids-generator", _capture(i for i in [2, 4]), TypeError, "a generator can be read only once"),
    ("api-capture-past-context", _capture([2, 4], n_tokens=70), ContextWarning, "reaches position 69, past the target's max_position_embeddings 64"),
    ("api-record-past-context", _record(torch.ones(1, 60, dtype=torch.long), max_new_tokens=8), ContextError, "max_position_embeddings is 64"),
    ("api-record-zero-token-prompt", _record(torch.zeros(1, 0, dtype=torch.long)), ValueError, "prompt 0 must be (1, T) input ids with T >= 1"),
    ("api-encode-zero-tokens", lambda c: encode(lambda t, **k: {"input_ids": torch.zeros(1, 0, dtype=torch.long)}, " ", "prompt 3"), ValueError, "prompt 3 ' ' encodes to 0 tokens"),
    ("cli-prompt-not-utf8", _cli("speculate", "--prompt", "x\udcff"), CliError, "--prompt is not UTF-8 text (byte 0xff at character 1)"),
    ("cli-capture-prompt-not-utf8", _cli("capture", "--prompt", "\udcffx"), CliError, "--prompt is not UTF-8 text"),
    ("cli-record-prompt-not-utf8", _cli("record", "--prompt", "\udce9t\udce9", "--out", "{tmp}/rec"), CliError, "--prompt is not UTF-8 text (byte 0xe9 at character 0)"),
    ("api-greedy-reference-beyond-context", _greedy(torch.ones(1, 10, dtype=torch.long), max_new_tokens=10**8), ContextError, "max_position_embeddings is 64"),
    ("api-prompts-single-string", lambda c: check_prompts("def f(x):"), PromptError, "got a single string"),
    ("api-prompts-empty-list", lambda c: check_prompts([]), PromptError, "empty list"),
    ("api-prompts-empty-prompt", lambda c: check_prompts(["a", ""]), PromptError, "prompt 1 is empty"),
    ("api-prompts-not-strings", lambda c: check_prompts([1, 2]), PromptError, "prompt 0 is a int"),
    ("api-specconfig-depth-string", lambda c: SpecConfig(depth="4"), ConfigError, "depth (--depth) must be an integer, got '4'"),
    ("api-specconfig-ablations-string", lambda c: SpecConfig(ablations="fc-bypass"), ConfigError, "ablations must be a list"),
    ("api-drafterconfig-hidden-string", lambda c: DrafterConfig(hidden_size="192", num_attention_heads=4, num_key_value_heads=2, intermediate_size=8, vocab_size=8, draft_vocab_size=8), ConfigError, "hidden_size must be an integer"),
    ("api-load-drafter-target-int", lambda c: load_drafter(c.good(), target=42), TypeError, "target must be a checkpoint path or a loaded HF model"),
    ("api-convert-unknown-format", lambda c: convert(c.good(), c.tmp / "o", "onnx"), ValueError, "unknown format 'onnx'"),
    ("api-params-misspelt", lambda c: importlib.import_module("eagle_nb.report.params").check_params({"max_new_token": 8}, importlib.import_module("eagle_nb.report.execute").list_notebooks()), ParamError, "did you mean 'max_new_tokens'"),
    ("api-build-reports-into-notebooks", lambda c: importlib.import_module("eagle_nb.report.build").build_reports(REPO / "notebooks" / "." ), ParamError, "the source notebooks folder"),
    ("api-load-target-missing", lambda c: importlib.import_module("eagle_nb.model.targets").load_target("no_such/target"), TargetError, "not in the local Hugging Face cache"),
    ("api-load-target-dtype-int8", lambda c: importlib.import_module("eagle_nb.model.targets").load_target(CODE_TARGET, dtype="int8"), ValueError, "choose one of"),
]


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang("no answer within the watchdog time: this input hangs")


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_is_refused_naming_the_fault(tmp_path, drafter, target, row):
    """Each bad input raises the expected error class with a message containing the phrase, as
    one paragraph without a traceback's worth of text, within FAST_S (watchdog: 30 s)."""
    name, run, cls, phrase = row
    if "cuda" in name and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    c = Ctx(tmp_path, drafter, target)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(30)
    cpu0 = time.process_time()
    try:
        with pytest.raises(cls) as ei:
            run(c)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    # CPU seconds, not wall: the shared CI cores are often oversubscribed; a hang is caught by
    # the 30 s wall-clock watchdog above
    took = time.process_time() - cpu0
    msg = str(ei.value)
    assert phrase in msg, f"{phrase!r} not in {msg!r}"
    assert "Traceback" not in msg and msg.count("\n") <= 3, msg
    assert took < FAST_S, f"{name} took {took:.1f} CPU s"


def test_table_size():
    """The README's reliability section quotes this count."""
    assert len(ROWS) + len(DATA_LOSS) >= 100


# -- what a careful user would expect instead of the refusals above ------------------------------------
def test_sharded_checkpoint_loads_like_the_single_file(tmp_path, drafter, target):
    """model.safetensors.index.json + two shards loads to the same drafter as one file."""
    c = Ctx(tmp_path, drafter, target)
    p = c.good()
    _sharded()(p, c)
    assert not (p / "model.safetensors").exists()
    loaded = load_drafter(p, target=target)
    for k, v in drafter.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k


def test_non_utf8_folder_name_loads(tmp_path, drafter, target):
    """A valid checkpoint in a folder whose name is not UTF-8 loads (it was refused as corrupt)."""
    src = save_drafter(drafter, tmp_path / "plain", "speculators")
    odd = os.path.join(os.fsencode(tmp_path), b"dr\xe4fter")
    shutil.copytree(os.fsencode(src), odd)
    loaded = load_drafter(os.fsdecode(odd))
    assert torch.equal(loaded.fc.weight, drafter.fc.weight)


def test_max_new_tokens_beyond_context_allocates_nothing(drafter, target, monkeypatch):
    """max_new_tokens = 1e8 is refused before the drafter cache is allocated; a budget that fits
    allocates at most context + 2*depth + 2 positions."""
    from eagle_nb.model.limits import ContextError
    from eagle_nb.loop.chain import generate
    sizes = []
    real = type(drafter).new_cache

    def spy(self, b, n):
        sizes.append(n)
        return real(self, b, n)
    monkeypatch.setattr(type(drafter), "new_cache", spy)
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ContextError):
        generate(target, drafter, ids, depth=4, max_new_tokens=10**8, layer_ids=[2, 4, 5])
    assert sizes == []
    toks, _ = generate(target, drafter, ids, depth=4, max_new_tokens=64 - 3 - 4, layer_ids=[2, 4, 5])
    assert len(toks) == 57 and sizes and max(sizes) <= 64 + 2 * 4 + 2


def test_truncate_prompt_is_explicit_and_warned(drafter, target):
    """fit_prompt refuses a too-long prompt by default; with truncate=True it keeps the last
    tokens that leave room for max_new_tokens + depth, and warns."""
    from eagle_nb.model.limits import ContextError, PromptTruncatedWarning, fit_prompt
    ids = torch.arange(100)[None] % 128
    with pytest.raises(ContextError):
        fit_prompt(ids, target, 8, 4)
    with pytest.warns(PromptTruncatedWarning, match="truncated from 100 to its last 52 tokens"):
        out = fit_prompt(ids, target, 8, 4, truncate=True)
    assert torch.equal(out, ids[:, -52:])


def test_good_params_pass_the_checks(tmp_path):
    """The parameter checks refuse nothing a notebook accepts: every default of every parameters
    cell, and typical overrides."""
    from eagle_nb.report.params import check_params, notebook_parameters
    from eagle_nb.report.execute import list_notebooks, resolve_params
    nbs = list_notebooks()
    for nb in nbs:
        check_params(notebook_parameters(nb), [nb])
    check_params(resolve_params({"depth": "6", "temperatures": "[0.0, 0.7]", "dtype": "bfloat16",
                                 "prompts_path": str(REPO / "data" / "eval_prompts.jsonl"),
                                 "device_map": "auto", "n_prompts": "4"}), nbs)


@pytest.mark.parametrize("args,phrase", [
    (["inspect", "{ckpt}"], "is a FIFO (named pipe)"),
    (["speculate", "--prompts", "{fifo}"], "is a FIFO (named pipe)"),
])
def test_cli_fifo_never_blocks(tmp_path, drafter, args, phrase):
    """End to end in a subprocess with a timeout: a FIFO where a file is expected exits 2 with a
    one-line error, no traceback."""
    ckpt = save_drafter(drafter, tmp_path / "c", "eagle")
    (ckpt / "config.json").unlink()
    os.mkfifo(ckpt / "config.json")
    os.mkfifo(tmp_path / "pipe")
    argv = [a.replace("{ckpt}", str(ckpt)).replace("{fifo}", str(tmp_path / "pipe")) for a in args]
    r = cli(*argv)
    out = r.stderr + r.stdout
    assert r.returncode != 0 and phrase in out and "Traceback" not in out, out
