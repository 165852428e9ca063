"""Writing a safetensors file tensor by tensor: the header first (names, dtypes, shapes known in
advance), then each tensor's bytes as its producer yields them, so a checkpoint of any size is
written holding one chunk at a time. The file is readable by `safetensors` and by io/lazy_weights.py.
`write_torch_bin` writes the same plan as `torch.save` lays out a state_dict (one tensor in memory
at a time). Knows nothing about formats.
"""
from __future__ import annotations

import collections
import io
import json
import math
import os
import pickle
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from eagle_nb.io.lazy_weights import CHUNK_BYTES, ST_DTYPES

ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


class Planned:
    """One tensor to write: its name, dtype, shape and a producer of 1-D chunks in that dtype
    (concatenated in order they make the flattened tensor)."""

    def __init__(self, name: str, dtype: torch.dtype, shape, chunks: Callable[[], Iterable[torch.Tensor]]):
        self.name, self.dtype, self.shape, self.chunks = name, dtype, tuple(shape), chunks

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def from_tensor(name: str, t: torch.Tensor, dtype: torch.dtype | None = None,
                max_bytes: int = CHUNK_BYTES) -> Planned:
    """A tensor already in memory, cast chunk by chunk to `dtype` (its own when None)."""
    dtype = dtype or t.dtype

    def chunks():
        flat = t.detach().reshape(-1)
        step = max(1, max_bytes // max(t.element_size(), 1))
        for i in range(0, flat.numel(), step):
            yield flat[i:i + step].to("cpu", dtype)
    return Planned(name, dtype, t.shape, chunks)


def write_safetensors(path, planned: list[Planned], metadata: dict | None = None) -> Path:
    """Write `planned` to `path` in order. A producer yielding the wrong dtype or byte count is an
    error (ValueError naming the tensor); the file is then incomplete: write into a temporary
    directory (files.AtomicDir) so nothing partial is ever left in place."""
    header, off = {}, 0
    for p in planned:
        if p.dtype not in ST_NAMES:
            raise ValueError(f"{p.name}: dtype {p.dtype} has no safetensors name")
        header[p.name] = {"dtype": ST_NAMES[p.dtype], "shape": list(p.shape),
                          "data_offsets": [off, off + p.nbytes]}
        off += p.nbytes
    header["__metadata__"] = metadata or {"format": "pt"}
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    path = Path(path)
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little") + blob)
        for p in planned:
            wrote = 0
            for c in p.chunks():
                if c.dtype != p.dtype:
                    raise ValueError(f"{p.name}: producer gave {c.dtype}, planned {p.dtype}")
                c = c.contiguous()
                f.write(memoryview(c.view(torch.uint8).numpy()) if c.numel() else b"")
                wrote += c.numel() * c.element_size()
            if wrote != p.nbytes:
                raise ValueError(f"{p.name}: producer gave {wrote} bytes, planned {p.nbytes} "
                                 f"({p.dtype}{list(p.shape)})")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
    return path


class _Storage:
    def __init__(self, key: str, dtype: torch.dtype, numel: int):
        self.key, self.dtype, self.numel = key, dtype, numel


class _Tensor:
    """Pickles as torch.save pickles a contiguous tensor of storage `s`."""

    def __init__(self, s: _Storage, shape):
        self.s, self.shape = s, tuple(shape)

    def __reduce_ex__(self, proto):
        stride = tuple(math.prod(self.shape[i + 1:]) for i in range(len(self.shape)))
        return (torch._utils._rebuild_tensor_v2,
                (self.s, 0, self.shape, stride, False, collections.OrderedDict()))


STORAGES = {torch.bfloat16: torch.BFloat16Storage, torch.float16: torch.HalfStorage,
            torch.float32: torch.FloatStorage, torch.int64: torch.LongStorage,
            torch.bool: torch.BoolStorage}


def write_torch_bin(path, planned: list[Planned]) -> Path:
    """`planned` as `torch.save` writes a state_dict (zip: data.pkl, then one data/N record per
    tensor), readable by `torch.load(weights_only=True)`; one tensor in memory at a time."""
    fake = {p.name: _Tensor(_Storage(str(i), p.dtype, math.prod(p.shape)), p.shape)
            for i, p in enumerate(planned)}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Storage):
                return ("storage", STORAGES[obj.dtype], obj.key, "cpu", obj.numel)
            return None
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(collections.OrderedDict(fake))
    w = torch._C.PyTorchFileWriter(str(path), True, 64)
    for name, data in (("data.pkl", buf.getvalue()), (".format_version", "1"),
                       (".storage_alignment", "64"), ("byteorder", sys.byteorder)):
        w.write_record(name, data, len(data))
    for p in planned:
        t = torch.cat(list(p.chunks())).view(torch.uint8).numpy().tobytes()
        w.write_record(f"data/{fake[p.name].s.key}", t, len(t))
        del t
    w.write_end_of_file()
    return Path(path)
