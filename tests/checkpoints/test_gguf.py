"""GGUF drafters and targets for llama.cpp: written from the shipped pair, read back through the
`gguf` reader, the planted faults seen by `inspect`, and the CLI (`inspect X.gguf`,
`convert --to gguf`). No llama.cpp binary needed (tests/engines/test_llama_cpp.py runs one)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from safetensors import safe_open

from eagle_nb.checkpoints.gguf_format import d2t_absolute, permute_qk
from eagle_nb.checkpoints.gguf_read import inspect_gguf, is_gguf, read_gguf
from eagle_nb.checkpoints.gguf_vocab import add_tokenizer
from eagle_nb.checkpoints.gguf_write import write_drafter_gguf, write_target_gguf
from eagle_nb.io.paths import CODE_DRAFTER, CODE_TARGET
from eagle_nb.io.target_parts import read_text_config
from eagle_nb.io.weight_files import CheckpointError

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def ggufs(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    out = {"target": write_target_gguf(CODE_TARGET, d / "target.gguf"),
           "drafter": write_drafter_gguf(CODE_DRAFTER, d / "drafter.gguf", CODE_TARGET)}
    for f in ("layer-ids+1", "d2t-absolute"):
        out[f] = write_drafter_gguf(CODE_DRAFTER, d / f"{f}.gguf", CODE_TARGET, fault=f)
    return out


def _safetensor(path, key):
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        return f.get_tensor(key)


def test_drafter_gguf_holds_llama_cpp_conventions(ggufs):
    """eagle3 arch, ids [2, 4, 5] (HF = llama.cpp convention), d2t as absolute ids = offsets +
    arange, q permuted as convert_hf_to_gguf does, fp16 weights widened exactly to fp32."""
    meta, t = read_gguf(ggufs["drafter"])
    assert meta["general.architecture"] == "eagle3"
    assert meta["eagle3.target_layers"] == [2, 4, 5] and meta["eagle3.target_hidden_size"] == 192
    off = _safetensor(CODE_DRAFTER, "d2t").numpy()
    assert np.array_equal(np.asarray(t["d2t"]["data"]), off + np.arange(off.size))
    assert t["d2t"]["type"] == "I64" and t["fc.weight"]["shape"] == [576, 192]
    q = _safetensor(CODE_DRAFTER, "midlayer.self_attn.q_proj.weight").float().numpy()
    assert np.array_equal(np.asarray(t["blk.0.attn_q.weight"]["data"]).reshape(q.shape), permute_qk(q, 6, 6))
    assert "token_embd.weight" not in t          # the shipped drafter has none: llama.cpp uses the target's
    assert "t2d" not in t
    rep = inspect_gguf(ggufs["drafter"], read_text_config(CODE_TARGET))
    assert rep["ok"] and not rep["warnings"], rep
    assert rep["d2t_verdict"].startswith("absolute target ids (ok") and rep["draft_vocab_size"] == 2048


def test_target_gguf_tensors_and_tokenizer(ggufs):
    """All 75 tensors, llama.cpp names, k permuted with the kv-head count; the tokenizer is gpt2
    BPE with the 4096 ids and 3839 merges of tokenizer.json, no BOS added (as the HF one)."""
    meta, t = read_gguf(ggufs["target"])
    assert meta["general.architecture"] == "llama" and meta["llama.block_count"] == 8
    assert len(t) == 75 and {"token_embd.weight", "output.weight", "output_norm.weight"} <= set(t)
    k = _safetensor(CODE_TARGET, "model.layers.3.self_attn.k_proj.weight").numpy()
    assert np.array_equal(np.asarray(t["blk.3.attn_k.weight"]["data"]).reshape(k.shape), permute_qk(k, 6, 2))
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] == "gpt-2"
    assert meta["tokenizer.ggml.tokens"]["entries"] == 4096 and meta["tokenizer.ggml.merges"]["entries"] == 3839
    assert meta["tokenizer.ggml.eos_token_id"] == 0 and meta["tokenizer.ggml.add_bos_token"] is False
    rep = inspect_gguf(ggufs["target"])
    assert rep["ok"] and rep["role"] == "target"


def test_permute_is_a_row_permutation():
    w = np.arange(12 * 3, dtype=np.float32).reshape(12, 3)
    p = permute_qk(w, 2)
    assert sorted(map(tuple, p)) == sorted(map(tuple, w)) and not np.array_equal(p, w)
    assert np.array_equal(d2t_absolute(np.array([3, 3, 5])), [3, 4, 7])


def test_planted_faults_are_what_inspect_reports(ggufs):
    """layer-ids+1: ids [3, 5, 6], a warning naming the +1 shift against the target; d2t-absolute:
    offsets where llama.cpp reads ids -> a problem naming the fault, ok False."""
    tc = read_text_config(CODE_TARGET)
    r = inspect_gguf(ggufs["layer-ids+1"], tc)
    assert r["target_layers"] == [3, 5, 6] and r["ok"]
    assert any("+1 each" in w for w in r["warnings"]), r["warnings"]
    r = inspect_gguf(ggufs["d2t-absolute"], tc)
    assert not r["ok"] and r["d2t_verdict"] == "offsets stored as ids (wrong)"
    assert "d2t-absolute" in r["problems"][0]
    off = _safetensor(CODE_DRAFTER, "d2t").numpy()
    assert np.array_equal(np.asarray(read_gguf(ggufs["d2t-absolute"])[1]["d2t"]["data"]), off)


def test_gguf_writer_refusals(tmp_path, ggufs):
    """An existing file without force, a directory as destination, a drafter without target, an
    unknown fault, a tokenizer whose pre-tokenizer llama.cpp cannot be told: each names the cause."""
    with pytest.raises(CheckpointError, match="exists; pass force=True"):
        write_target_gguf(CODE_TARGET, ggufs["target"])
    with pytest.raises(CheckpointError, match="is a directory"):
        write_target_gguf(CODE_TARGET, tmp_path)
    with pytest.raises(CheckpointError, match="needs the target"):
        write_drafter_gguf(CODE_DRAFTER, tmp_path / "d.gguf", None)
    with pytest.raises(ValueError, match="unknown GGUF fault"):
        write_drafter_gguf(CODE_DRAFTER, tmp_path / "d.gguf", CODE_TARGET, fault="fc-bypass")
    tok = tmp_path / "tok"
    tok.mkdir()
    tj = json.loads((CODE_TARGET / "tokenizer.json").read_text())
    tj["pre_tokenizer"] = {"type": "Metaspace"}
    (tok / "tokenizer.json").write_text(json.dumps(tj))
    (tok / "config.json").write_text("{}")
    import gguf
    with pytest.raises(CheckpointError, match=r"tokenizer.json: pre_tokenizer .*Metaspace"):
        add_tokenizer(gguf.GGUFWriter(str(tmp_path / "x.gguf"), "llama"), tok)
    assert not list(tmp_path.glob(".*partial*"))


def test_reader_never_takes_a_non_gguf(tmp_path):
    f = tmp_path / "x.gguf"
    f.write_bytes(b"not a gguf at all")
    assert not is_gguf(f) and not is_gguf(tmp_path)
    with pytest.raises(CheckpointError, match="not a readable GGUF"):
        read_gguf(f)


def test_cli_convert_and_inspect_gguf(tmp_path):
    """`convert --to gguf` writes target and drafter and prints the ids and the d2t verdict;
    `inspect FILE.gguf --json` exits 0 for the healthy drafter and 1 for d2t-absolute."""
    def cli(*a):
        p = subprocess.run([sys.executable, "-m", "eagle_nb", *a], capture_output=True, text=True,
                           env=ENV, timeout=300, check=False)
        return p.returncode, p.stdout, p.stderr
    rc, out, err = cli("convert", str(CODE_TARGET), str(tmp_path / "t.gguf"), "--to", "gguf")
    assert rc == 0 and "wrote target GGUF" in out, err
    rc, out, err = cli("convert", str(CODE_DRAFTER), str(tmp_path / "d.gguf"), "--to", "gguf",
                       "--target", str(CODE_TARGET))
    assert rc == 0 and "[2, 4, 5]" in out and "absolute target ids (ok" in out, err
    rc, out, err = cli("convert", str(CODE_DRAFTER), str(tmp_path / "b.gguf"), "--to", "gguf",
                       "--target", str(CODE_TARGET), "--fault", "d2t-absolute")
    assert rc == 0 and "problem: d2t holds offsets" in out, err
    rc, out, _ = cli("inspect", str(tmp_path / "d.gguf"), "--target", str(CODE_TARGET), "--json")
    d = json.loads(out)
    assert rc == 0 and d["ok"] and d["target_layers"] == [2, 4, 5] and d["tensors"]["d2t"] == [[2048], "I64"]
    rc, out, _ = cli("inspect", str(tmp_path / "b.gguf"))
    assert rc == 1 and "offsets stored as ids (wrong)" in out
    rc, _, err = cli("convert", str(CODE_DRAFTER), str(tmp_path / "d.gguf"), "--to", "gguf",
                     "--target", str(CODE_TARGET))
    assert rc == 2 and "exists; pass force=True" in err


def test_doctor_static_checks_on_gguf_drafters(ggufs):
    """The doctor reads a GGUF drafter statically: healthy passes, d2t-absolute fails naming the
    fault (the verdict), layer-ids+1 is a warning pointing at that fault."""
    from eagle_nb.doctor.run import doctor
    d = doctor(str(ggufs["drafter"]), CODE_TARGET, dynamic=False)
    assert d.verdict.cause == "healthy" and all(c.status == "pass" for c in d.checks), d.checks
    d = doctor(str(ggufs["d2t-absolute"]), CODE_TARGET, dynamic=False)
    assert d.verdict.cause == "d2t-absolute" and d.verdict.basis == "static"
    d = doctor(str(ggufs["layer-ids+1"]), CODE_TARGET, dynamic=False)
    aux = next(c for c in d.checks if c.id == "aux-ids")
    assert aux.status == "warn" and aux.faults == ["layer-ids+1"]
    assert any("static checks only" in n for n in d.notes)
