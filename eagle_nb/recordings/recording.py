"""Recordings of a target's greedy continuations with its aux hidden states: everything greedy
chain speculation needs from the target, written once where the target runs, replayed anywhere.

A recording is a directory: `recording.json` (target name, HF layer ids, widths, one entry per
record) plus safetensors shards holding, per record, `<name>.input_ids` (prompt + greedy
continuation, int64), `<name>.aux` (the aux states at every position that was fed to the target,
layers concatenated in ascending HF id order) and optionally `<name>.final` (the final, post-norm
hidden state). The continuation is decoded exactly as `loop/chain.py` `greedy_reference` decodes (one
token per forward, HF cache), for `max_new_tokens + lookahead` tokens and without stopping at EOS,
so that a replay at depth <= lookahead sees every target token a live loop would verify.

The same format comes from vLLM (`eagle-nb record --engine vllm`, engines/recorder.py): the
engine's own greedy continuation and aux states, stated in the index's `source` and `engine`.
Writing is recording_writer.py's. Readers: our format, plus the offline-training files of
SpecForge and speculators (foreign_features.py). Knows nothing about drafters; replay.py uses
the records.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import torch
from tqdm.auto import tqdm

from eagle_nb.recordings.recording_writer import FORMAT, INDEX, RecordingWriter
from eagle_nb.recordings.records import Record, RecordingError
from eagle_nb.model.capture import capture
from eagle_nb.model.decoder import num_decoder_layers
from eagle_nb.model.layers import check_layer_ids
from eagle_nb.model.limits import check_fits, context_length



# -- writing ---------------------------------------------------------------------------------------
def _cache_kwarg(model) -> str:
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@torch.no_grad()
def record_one(model, input_ids: torch.Tensor, layer_ids, n_tokens: int, *, final_hidden=False,
               layers_path=None, dtype=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Greedy-decode `n_tokens` after `input_ids` (1, T0), one token per forward with the HF cache,
    capturing the aux states of every fed position. Returns (ids (T0+n,), aux (T0+n-1, W),
    final (T0+n-1, H) or None), all on the CPU. Works with a `device_map`-sharded model: inputs go
    to the embedding's device and each captured state is moved to the CPU as it is recorded."""
    from transformers import DynamicCache
    dev = model.get_input_embeddings().weight.device
    params = inspect.signature(model.forward).parameters
    kw = {"use_cache": True}
    if "logits_to_keep" in params:
        kw["logits_to_keep"] = 1
    cache_kw = _cache_kwarg(model)
    kw[cache_kw] = DynamicCache(config=model.config) if "config" in \
        inspect.signature(DynamicCache.__init__).parameters else DynamicCache()
    ids, out_ids, auxs, finals = input_ids.to(dev), [], [], []
    with capture(model, layer_ids, layers_path=layers_path, device="cpu", dtype=dtype) as states:
        for _ in range(n_tokens):
            out = model(input_ids=ids, output_hidden_states=final_hidden, **kw)
            auxs.append(states.fused()[0])                                   # (t, W)
            if final_hidden:
                finals.append(out.hidden_states[-1][0].to("cpu", dtype or out.hidden_states[-1].dtype))
            nxt = out.logits[0, -1].argmax()
            out_ids.append(int(nxt))
            ids = nxt.view(1, 1).to(dev)
    full = torch.cat([input_ids[0].cpu(), torch.tensor(out_ids, dtype=torch.long)])
    aux = torch.cat(auxs)[: full.numel() - 1]   # the last token is never fed
    final = torch.cat(finals)[: full.numel() - 1] if final_hidden else None
    return full, aux, final


def record(model, prompts_ids, out_dir, layer_ids, *, max_new_tokens: int = 64, lookahead: int = 8,
           target_name: str = "", final_hidden: bool = False, layers_path=None, dtype=None,
           shard_bytes: int = 256 * 2**20, eos_token_id=None, progress: bool = True,
           texts=None) -> Path:
    """Record greedy continuations of `prompts_ids` (list of (1, T0) tensors) into `out_dir`.
    `layer_ids` are HF hidden_states ids ("all" or `range(L + 1)` keeps every layer, which faults
    reading other layers need). Each record holds max_new_tokens + lookahead tokens, so replays at
    depth <= lookahead are exact. `texts`: the prompts' text, kept in the index."""
    L = num_decoder_layers(model, layers_path)
    ids = check_layer_ids(range(L + 1) if layer_ids == "all" else layer_ids, L)
    prompts_ids = list(prompts_ids)
    for i, p in enumerate(prompts_ids):      # before anything is decoded or written
        if not isinstance(p, torch.Tensor) or p.dim() != 2 or p.shape[0] != 1 or p.shape[1] == 0:
            raise ValueError(f"record: prompt {i} must be (1, T) input ids with T >= 1, got "
                             f"{tuple(p.shape) if isinstance(p, torch.Tensor) else type(p).__name__}")
        # past the context the states are garbage, and every number replayed from them would be
        check_fits(p.shape[1], max_new_tokens + lookahead, 0, context_length(model),
                   f"record: prompt {i} (+ max_new_tokens {max_new_tokens} + lookahead {lookahead})")
    run_dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    w = RecordingWriter(out_dir, ids, num_layers=L, target_name=target_name,
                        model_class=type(model).__name__, max_new_tokens=max_new_tokens,
                        lookahead=lookahead, eos_token_id=eos_token_id, final_hidden=final_hidden,
                        shard_bytes=shard_bytes, meta={"target_dtype": run_dtype})
    texts = list(texts) if texts is not None else [None] * len(prompts_ids)
    for p, text in tqdm(list(zip(prompts_ids, texts)), desc=f"record {max_new_tokens}+{lookahead} tokens",
                        disable=not progress):
        full, aux, final = record_one(model, p, ids, max_new_tokens + lookahead,
                                      final_hidden=final_hidden, layers_path=layers_path, dtype=dtype)
        w.add(full, int(p.shape[-1]), aux, final, prompt=text)
    return w.close()


# -- reading ---------------------------------------------------------------------------------------
class DtypeMismatchWarning(UserWarning):
    """A recording is compared with a target run in another dtype: greedy tokens can differ at
    near-ties, so numbers computed from the recording differ from the run's (record again in the
    run's dtype, e.g. `eagle-nb record --engine vllm --dtype float32`)."""


def check_dtype(recording: "Recording", dtype, against: str) -> str | None:
    """Warn (DtypeMismatchWarning) when `recording` was made in another dtype than `dtype`, the
    dtype `against` runs the target in; returns the message, or None when they agree or either
    is unknown."""
    import warnings
    have = recording.target_dtype
    want = None if dtype is None else str(dtype).removeprefix("torch.")
    if have is None or want is None or have == want:
        return None
    msg = (f"{recording.path}: recorded with the target in {have}, compared with {against} running it "
           f"in {want}: greedy tokens can differ at near-ties, so taus differ; record in {want} "
           f"(eagle-nb record --dtype {want}, also with --engine)")
    warnings.warn(msg, DtypeMismatchWarning, stacklevel=3)
    return msg


class Recording:
    """A recording directory. Iterating yields `Record`s one at a time (`read(name)` reads one),
    from their shard with safetensors (memory-mapped): only the current record is in memory.
    Foreign formats (SpecForge .ckpt, speculators .pt / hs_*.safetensors) are read by
    foreign_features.py."""

    def __init__(self, path):
        self.path = Path(path)
        f = self.path / INDEX
        self._files = None
        if not f.exists():
            from eagle_nb.recordings.foreign_features import (
                read_foreign,  # other trainers' files
            )
            self.meta, self._files, self._reader = read_foreign(self.path)
            return
        try:
            self.meta = json.loads(f.read_text())
        except json.JSONDecodeError as e:
            raise RecordingError(f"{f}: invalid JSON ({e})") from None
        if self.meta.get("format") != FORMAT:
            raise RecordingError(f"{f}: format {self.meta.get('format')!r} is not {FORMAT!r}")
        for k in ("layer_ids_hf", "records", "max_new_tokens", "lookahead", "num_layers"):
            if k not in self.meta:
                raise RecordingError(f"{f}: missing field {k!r}")
        missing = sorted({r["shard"] for r in self.meta["records"]} - {p.name for p in self.path.iterdir()})
        if missing:
            raise RecordingError(f"{f}: shard files listed but absent: {missing[:5]}")
        self._index = {r["name"]: r for r in self.meta["records"]}

    @property
    def teacher_forced(self) -> bool:
        return bool(self.meta.get("teacher_forced"))

    @property
    def layer_ids(self) -> list[int] | None:
        return self.meta.get("layer_ids_hf")

    @property
    def target_dtype(self) -> str | None:
        """The dtype the target computed the recorded states in (None: unknown, e.g. trainers'
        files). Recordings from before the field: the engine's stated dtype, else the states'."""
        m = self.meta
        engine = (m.get("engine") or {}).get("dtype")
        return m.get("target_dtype") or (engine if engine not in (None, "auto") else m.get("dtype"))

    @property
    def names(self) -> list[str]:
        return [r["name"] for r in self.meta["records"]]

    def __len__(self) -> int:
        return len(self.meta["records"])

    def __iter__(self):
        for name in self.names:
            yield self.read(name)

    def prompt_ids(self, name: str) -> tuple[torch.Tensor, int, int]:
        """(prompt ids, prompt length, total length) of one record, reading its ids only where the
        format allows (trainers' files are read whole)."""
        if self._files is not None:
            r = self.read(name)
            return r.input_ids[:r.prompt_len], r.prompt_len, r.input_ids.numel()
        from safetensors import safe_open
        r = self._index[name]
        with safe_open(str(self.path / r["shard"]), "pt") as st:
            ids = st.get_tensor(f"{name}.input_ids").long()
        return ids[:int(r["prompt_len"])], int(r["prompt_len"]), ids.numel()

    def read(self, name: str) -> Record:
        """One record, read from its shard (or its trainer's file)."""
        if self._files is not None:
            return self._reader(self._files[name])
        from safetensors import safe_open
        r = self._index[name]
        f = self.path / r["shard"]
        try:
            with safe_open(str(f), "pt") as st:
                keys = set(st.keys())
                for k in ("input_ids", "aux"):
                    if f"{name}.{k}" not in keys:
                        raise RecordingError(f"{f}: no tensor {name}.{k!r}")
                return Record(name, st.get_tensor(f"{name}.input_ids").long(), int(r["prompt_len"]),
                              st.get_tensor(f"{name}.aux"),
                              st.get_tensor(f"{name}.final") if f"{name}.final" in keys else None)
        except RecordingError:
            raise
        except Exception as e:  # noqa: BLE001 - a corrupt shard is the user's file fault
            raise RecordingError(f"{f}: cannot read record {name}: {type(e).__name__}: {e}") from None
