"""io/lazy_weights.py and io/stream_write.py: headers without data, memory-mapped views, bounded
streamed copies, equal to what safetensors / torch.load read whole; corrupt headers named."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle_nb.io.lazy_weights import WeightFile, open_weights
from eagle_nb.io.stream_write import Planned, from_tensor, write_safetensors
from eagle_nb.io.weight_files import CheckpointError


def sample() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"a.weight": torch.randn(7, 5, generator=g).to(torch.bfloat16),
            "b": torch.randn(3, generator=g), "d2t": torch.arange(4, dtype=torch.int64),
            "t2d": torch.tensor([True, False, True]), "h": torch.randn(2, 2, generator=g).half()}


@pytest.mark.parametrize("kind", ["safetensors", "bin"])
def test_views_reads_and_chunks_equal_the_whole_file(tmp_path, kind):
    s = sample()
    f = tmp_path / ("model.safetensors" if kind == "safetensors" else "pytorch_model.bin")
    save_file(s, str(f)) if kind == "safetensors" else torch.save(s, f)
    wf = WeightFile(f)
    assert set(wf.entries) == set(s)
    for k, v in s.items():
        e = wf.entries[k]
        assert (e.dtype, e.shape, e.offset is not None) == (v.dtype, tuple(v.shape), True)
        assert torch.equal(wf.tensor(k), v) and torch.equal(wf.read(k), v)
        assert torch.equal(torch.cat(list(wf.chunks(k, max_bytes=4))), v.reshape(-1))


def test_a_view_is_copy_on_write(tmp_path):
    f = tmp_path / "model.safetensors"
    save_file(sample(), str(f))
    before = f.read_bytes()
    t = WeightFile(f).tensor("b")
    t.add_(1.0)                          # a private page: the file never changes
    assert f.read_bytes() == before and torch.equal(WeightFile(f).read("b") + 1.0, t)


def test_sharded_index(tmp_path):
    s = sample()
    save_file({k: s[k] for k in ("a.weight", "b")}, str(tmp_path / "m-1.safetensors"))
    save_file({k: s[k] for k in ("d2t", "t2d", "h")}, str(tmp_path / "m-2.safetensors"))
    wmap = {"a.weight": "m-1.safetensors", "b": "m-1.safetensors", "d2t": "m-2.safetensors",
            "t2d": "m-2.safetensors", "h": "m-2.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wmap}))
    w = open_weights(tmp_path)
    assert w.file.name == "model.safetensors.index.json" and set(w) == set(s)
    assert all(torch.equal(w[k], v) for k, v in s.items())
    wmap["extra"] = "m-2.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wmap}))
    with pytest.raises(CheckpointError, match=r"m-2.safetensors: lacks \['extra'\]"):
        open_weights(tmp_path)


@pytest.mark.parametrize("damage, phrase", [
    (lambda b: b[:6], "shorter than a safetensors header"),
    (lambda b: (10 ** 9).to_bytes(8, "little") + b[8:], "header length"),
    (lambda b: b[:-4], "needs"),
    (lambda b: b[:8] + b"[" + b[9:], "header is not JSON"),
])
def test_corrupt_safetensors_headers_are_named(tmp_path, damage, phrase):
    f = tmp_path / "model.safetensors"
    save_file(sample(), str(f))
    f.write_bytes(damage(f.read_bytes()))
    with pytest.raises(CheckpointError, match=f"model.safetensors: corrupt or truncated: .*{phrase}"):
        WeightFile(f)


def test_streamed_writer_round_trips_and_checks_its_producers(tmp_path):
    s = sample()
    planned = [from_tensor(k, v, max_bytes=6) for k, v in s.items()]
    planned[0] = from_tensor("a.weight", s["a.weight"], torch.float32, max_bytes=6)
    f = write_safetensors(tmp_path / "x.safetensors", planned)
    back = load_file(str(f))
    assert back["a.weight"].dtype == torch.float32 and torch.equal(back["a.weight"], s["a.weight"].float())
    assert all(torch.equal(back[k], s[k]) for k in s if k != "a.weight")
    short = Planned("z", torch.float32, (4,), lambda: iter([torch.zeros(3)]))
    with pytest.raises(ValueError, match=r"z: producer gave 12 bytes, planned 16"):
        write_safetensors(tmp_path / "y.safetensors", [short])


@pytest.mark.parametrize("second", [[0, 16], [8, 24]], ids=["same-range", "overlapping"])
def test_tensors_sharing_bytes_are_refused_naming_both(tmp_path, second):
    """A header that gives two tensors the same (or overlapping) bytes is refused, naming the file
    and both tensors, as the safetensors library refuses it; read lazily, `norm.weight` would
    otherwise silently return `midlayer.hidden_norm.weight`'s values."""
    header = {"midlayer.hidden_norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
              "norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": second}}
    text = json.dumps(header).encode()
    f = tmp_path / "model.safetensors"
    f.write_bytes(len(text).to_bytes(8, "little") + text + bytes(24))
    with pytest.raises(Exception, match="invalid offset"):
        load_file(str(f))                       # what the library says
    with pytest.raises(CheckpointError, match=r"model.safetensors: corrupt or truncated: tensors "
                       r"'midlayer.hidden_norm.weight' .* and 'norm.weight' .* overlap"):
        open_weights(tmp_path)
