"""Weight files read lazily: names, dtypes and shapes from the headers; a tensor's bytes only when
asked, either as a zero-copy memory-mapped view (loading) or as a bounded copy read with
plain file reads (statistics, conversion), so that streaming never grows the process by the
file's size.

`model.safetensors` headers are parsed here (8-byte length, JSON) and checked against the file
size before any byte of data is trusted; `pytorch_model.bin` is opened with
`torch.load(weights_only=True, mmap=True)`: only its pickle is read, never code, and the offset
of each tensor in the zip archive is recovered so it can be read like a safetensors record. A
pre-zip (legacy) `.bin` cannot be memory-mapped and is read whole, the one exception.
`open_weights(dir)` gives one `Weights` mapping over a checkpoint's file or shards. Knows nothing
about formats or key names.
"""
from __future__ import annotations

import json
import math
import mmap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from eagle_nb.io.files import UserFileError, check_regular, show
from eagle_nb.io.weight_files import (
    CheckpointError,
    absent_from_shard,
    check_state_dict,
    find_weights_file,
    shard_map,
)

ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
             "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "I16": torch.int16,
             "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
             "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2}
HEADER_CAP = 100 << 20
CHUNK_BYTES = 16 << 20     # a chunk and its temporaries (isfinite, casts): ~5 x this


@dataclass(frozen=True)
class Entry:
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int | None        # absolute file offset of contiguous data; None: not known
    nbytes: int

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class WeightFile:
    """One weights file. `entries` {name: Entry} from the header; `tensor(k)` a memory-mapped
    view (no copy; pages are read when touched), `read(k)` a private copy, `chunks(k)` 1-D copies
    of at most CHUNK_BYTES, read from the file (the process never maps what it streams)."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self.size = check_regular(self.path, "weights file", 1 << 50)
        except UserFileError as e:
            raise CheckpointError(str(e)) from None
        self._mm = None
        self._bin: dict | None = None
        if self.path.name.endswith(".safetensors"):
            self.entries = self._safetensors_header()
        else:
            self.entries = self._bin_entries()

    def __repr__(self) -> str:
        return f"WeightFile({show(self.path)}, {len(self.entries)} tensors)"

    def _bad(self, why: str) -> CheckpointError:
        return CheckpointError(f"{show(self.path)}: corrupt or truncated: {why}")

    # -- headers -----------------------------------------------------------------------------------
    def _safetensors_header(self) -> dict[str, Entry]:
        with open(self.path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise self._bad(f"{self.size} bytes, shorter than a safetensors header")
            n = int.from_bytes(head, "little")
            if n > min(HEADER_CAP, self.size - 8):
                raise self._bad(f"header length {n} exceeds the file ({self.size} bytes)")
            try:
                header = json.loads(f.read(n))
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise self._bad(f"header is not JSON ({e})") from None
        if not isinstance(header, dict):
            raise self._bad("header is not a JSON object")
        out, base = {}, 8 + n
        for k, v in header.items():
            if k == "__metadata__":
                continue
            try:
                dtype = ST_DTYPES[v["dtype"]]
                shape = tuple(int(s) for s in v["shape"])
                b, e = (int(x) for x in v["data_offsets"])
            except (KeyError, TypeError, ValueError) as err:
                raise self._bad(f"entry {k!r} is not {{dtype, shape, data_offsets}} "
                                f"({type(err).__name__}: {err})") from None
            nbytes = math.prod(shape) * dtype.itemsize
            if min(shape, default=0) < 0 or e - b != nbytes or b < 0 or base + e > self.size:
                raise self._bad(f"{k!r} {v['dtype']}{list(shape)} needs {nbytes} bytes at "
                                f"{b}..{e}; the file has {self.size - base} data bytes")
            out[k] = Entry(dtype, shape, base + b, nbytes)
        self._no_shared_bytes(out)
        return out

    def _no_shared_bytes(self, entries: dict[str, Entry]) -> None:
        """Two tensors whose byte ranges overlap would silently read each other's values; the
        safetensors library refuses such a header ("invalid offset"), and so do we, naming both."""
        spans = sorted((e.offset, e.offset + e.nbytes, k) for k, e in entries.items() if e.nbytes)
        for (b0, e0, k0), (b1, e1, k1) in zip(spans, spans[1:]):
            if b1 < e0:
                raise self._bad(f"tensors {k0!r} (file bytes {b0}..{e0}) and {k1!r} ({b1}..{e1}) "
                                f"overlap: one would read the other's values (the "
                                f"safetensors library refuses this header: invalid offset)")

    def _bin_entries(self) -> dict[str, Entry]:
        try:
            state = torch.load(self.path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as e:
            if "mmap" not in str(e):
                raise self._refused(e) from None
            state = self._load_whole()       # pre-zip .bin: cannot be mapped
        except Exception as e:  # noqa: BLE001 - any reader failure is the user's file
            raise self._refused(e) from None
        self._bin = state = check_state_dict(state, self.path)
        offsets = self._bin_offsets(state)
        return {k: Entry(v.dtype, tuple(v.shape), offsets.get(k), v.numel() * v.element_size())
                for k, v in state.items()}

    def _load_whole(self):
        try:
            return torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise self._refused(e) from None

    def _refused(self, e: Exception) -> CheckpointError:
        kind = "refused to unpickle (weights_only=True; it holds code or objects)" \
            if "weights_only" in str(e) or "Unpickl" in type(e).__name__ else "corrupt or truncated"
        return CheckpointError(f"{show(self.path)}: {kind}: {type(e).__name__}: {str(e)[:200]}")

    def _bin_offsets(self, state: dict) -> dict[str, int]:
        """File offset of each contiguous tensor: the archive maps at one base, so a storage's
        address minus the base is its record's offset (checked against every record)."""
        try:
            reader = torch._C.PyTorchFileReader(str(self.path))
            recs = {reader.get_record_offset(r) for r in reader.get_all_records() if "/data/" in f"/{r}"}
        except Exception:  # noqa: BLE001 - legacy or unusual archive: stream through the mapping
            return {}
        ptrs = {v.untyped_storage().data_ptr() for v in state.values() if v.numel()}
        if not ptrs or not recs:
            return {}
        base = min(ptrs) - min(recs)
        if any(p - base not in recs for p in ptrs):
            return {}
        return {k: v.untyped_storage().data_ptr() - base + v.storage_offset() * v.element_size()
                for k, v in state.items() if v.is_contiguous() and v.numel()}

    # -- data --------------------------------------------------------------------------------------
    def tensor(self, key: str) -> torch.Tensor:
        """A memory-mapped view of `key` (copy-on-write: writes never reach the file)."""
        e = self.entries[key]
        if self._bin is not None:
            return self._bin[key]
        if e.nbytes == 0 or e.offset % e.dtype.itemsize:
            return self.read(key)
        if self._mm is None:
            with open(self.path, "rb") as f:
                self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        t = torch.frombuffer(self._mm, dtype=torch.uint8, count=e.nbytes, offset=e.offset)
        return t.view(e.dtype).view(e.shape)

    def read(self, key: str) -> torch.Tensor:
        """A private copy of `key`."""
        e = self.entries[key]
        if e.offset is None:
            return self._bin[key].clone()
        flat = torch.empty(e.numel, dtype=e.dtype)
        self._pread_into(flat, e.offset)
        return flat.view(e.shape)

    def chunks(self, key: str, max_bytes: int = CHUNK_BYTES):
        """`key` flattened, as copies of at most `max_bytes` each."""
        e = self.entries[key]
        step = max(1, max_bytes // e.dtype.itemsize)
        if e.offset is None:
            flat = self._bin[key].reshape(-1)
            for i in range(0, e.numel, step):
                yield flat[i:i + step].clone()
            return
        for i in range(0, e.numel, step):
            part = torch.empty(min(step, e.numel - i), dtype=e.dtype)
            self._pread_into(part, e.offset + i * e.dtype.itemsize)
            yield part

    def _pread_into(self, t: torch.Tensor, offset: int) -> None:
        buf = memoryview(t.view(torch.uint8).numpy())
        with open(self.path, "rb", buffering=0) as f:
            f.seek(offset)
            got = 0
            while got < len(buf):
                n = f.readinto(buf[got:])
                if not n:
                    raise self._bad(f"ends at {offset + got} while reading {len(buf)} bytes at {offset}")
                got += n


class Weights(Mapping):
    """A checkpoint's tensors by name, across its file or shards: `weights[k]` is a memory-mapped
    view (nothing read until touched); `entry`, `read`, `chunks` as on WeightFile. `file` is the
    weights file or shard index the checkpoint names."""

    def __init__(self, file: Path, parts: dict[str, WeightFile]):
        self.file, self._parts = file, parts          # name -> the WeightFile holding it

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._parts[key].tensor(key)

    def __iter__(self):
        return iter(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def entry(self, key: str) -> Entry:
        return self._parts[key].entries[key]

    def read(self, key: str) -> torch.Tensor:
        return self._parts[key].read(key)

    def chunks(self, key: str, max_bytes: int = CHUNK_BYTES):
        return self._parts[key].chunks(key, max_bytes)

    def file_of(self, key: str) -> Path:
        return self._parts[key].path


def open_weights(path) -> Weights:
    """The weights of checkpoint directory `path`: one file, or the shards its index lists (each
    shard must hold the names the index places in it; only those are taken from it)."""
    f = find_weights_file(Path(path))
    if not f.name.endswith(".index.json"):
        wf = WeightFile(f)
        return Weights(f, dict.fromkeys(wf.entries, wf))
    wmap = shard_map(f)
    parts: dict[str, WeightFile] = {}
    for sh in sorted(set(wmap.values()), key=str):
        wf = WeightFile(f.parent / sh)
        absent_from_shard(f, wmap, sh, wf.entries)
        parts.update({k: wf for k in wf.entries if wmap.get(k) == sh})
    return Weights(f, parts)


class LazyState(dict):
    """A state dict {name: memory-mapped view} that remembers where each tensor lives
    (`origin[name]` = its name in `weights`), so statistics can stream it instead of touching
    the mapping. Renamed or added entries are plain tensors."""

    def __init__(self, items, weights: Weights, origin: dict[str, str]):
        super().__init__(items)
        self.weights, self.origin = weights, origin


def stream(state: dict, key: str, max_bytes: int = CHUNK_BYTES):
    """Flattened 1-D copies of `state[key]` of at most `max_bytes`: read from the file when
    `state` is a LazyState that knows the tensor, sliced from memory otherwise."""
    if isinstance(state, LazyState) and key in state.origin:
        yield from state.weights.chunks(state.origin[key], max_bytes)
        return
    flat = state[key].detach().reshape(-1)
    step = max(1, max_bytes // max(flat.element_size(), 1))
    for i in range(0, flat.numel(), step):
        yield flat[i:i + step]
