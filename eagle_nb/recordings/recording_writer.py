"""Writing the kit's recording format (recording.py describes it): shards of `<name>.input_ids`,
`<name>.aux`, optional `<name>.final`, and the `recording.json` index, filled one record at a time.

One writer for every producer: `recording.record` (the target in transformers) and
`engines.recorder` (the target in vLLM). Knows the file layout only; no model, no engine.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

INDEX = "recording.json"


FORMAT = "eagle_nb.recording"


VERSION = 1



def prompt_entry(prompt) -> dict:
    """The index fields of a record's prompt: `prompt` (raw text) or `messages` (a chat's turns)."""
    if prompt is None:
        return {}
    if hasattr(prompt, "as_dicts"):                     # io/prompts.py Chat
        return {"messages": prompt.as_dicts()}
    return {"prompt": prompt}

class RecordingWriter:
    """`add()` records one prompt's (ids, aux[, final]); `close()` writes the last shard and the
    index. `layer_ids` are HF ids in ascending order, the order of `aux`'s column blocks.
    `meta` adds or overrides index fields (e.g. `source`, `engine`, `target_dtype`: the dtype the
    target computed in; `dtype` is the stored states' own)."""

    def __init__(self, out_dir, layer_ids, *, num_layers: int, target_name: str = "",
                 model_class: str = "", max_new_tokens: int, lookahead: int, eos_token_id=None,
                 final_hidden: bool = False, shard_bytes: int = 256 * 2**20, meta: dict | None = None):
        if list(layer_ids) != sorted(layer_ids):
            raise ValueError(f"recording layer ids {list(layer_ids)} must be ascending: the aux blocks "
                             f"are stored in ascending HF id order")
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.shard_bytes = shard_bytes
        self.index = {"format": FORMAT, "version": VERSION, "target": target_name,
                      "model_class": model_class, "num_layers": int(num_layers),
                      "layer_ids_hf": [int(i) for i in layer_ids], "hidden_size": None,
                      "max_new_tokens": max_new_tokens, "lookahead": lookahead,
                      "eos_token_id": eos_token_id, "final_hidden": final_hidden,
                      "teacher_forced": False,
                      "source": "eagle_nb greedy decoding (one token per forward, HF cache)",
                      "dtype": None, "target_dtype": None, **(meta or {}), "shards": [], "records": []}
        self._shard: dict[str, torch.Tensor] = {}
        self._size = 0

    def _shard_name(self) -> str:
        return f"shard-{len(self.index['shards']):05d}.safetensors"

    def _flush(self) -> None:
        from safetensors.torch import save_file
        if self._shard:
            save_file(self._shard, str(self.out / self._shard_name()), metadata={"format": FORMAT})
            self.index["shards"].append(self._shard_name())
        self._shard, self._size = {}, 0

    def add(self, input_ids: torch.Tensor, prompt_len: int, aux: torch.Tensor,
            final: torch.Tensor | None = None, prompt=None) -> str:
        """One record: `input_ids` (T,) prompt + continuation, `aux` (T-1, n*H) the states of every
        fed position, `final` (T-1, H) post-norm or None, `prompt` the prompt's text or `Chat` (kept
        in the index, so a replay can list what was recorded). Returns the record's name."""
        n_fed = input_ids.numel() - 1
        if aux.shape[0] != n_fed or (final is not None and final.shape[0] != n_fed):
            raise ValueError(f"record of {input_ids.numel()} tokens needs states for {n_fed} fed "
                             f"positions; got aux {tuple(aux.shape)}"
                             + (f", final {tuple(final.shape)}" if final is not None else ""))
        name = f"r{len(self.index['records']):06d}"
        tensors = {f"{name}.input_ids": input_ids.long().contiguous(), f"{name}.aux": aux.contiguous()}
        if final is not None:
            tensors[f"{name}.final"] = final.contiguous()
        self._shard.update(tensors)
        self.index["hidden_size"] = aux.shape[-1] // len(self.index["layer_ids_hf"])
        self.index["dtype"] = str(aux.dtype).replace("torch.", "")
        self.index["records"].append({"name": name, "shard": self._shard_name(),
                                      "prompt_len": int(prompt_len), "length": int(input_ids.numel()),
                                      **prompt_entry(prompt)})
        self._size += sum(t.numel() * t.element_size() for t in tensors.values())
        if self._size >= self.shard_bytes:
            self._flush()
        return name

    def close(self) -> Path:
        self._flush()
        (self.out / INDEX).write_text(json.dumps(self.index, indent=1) + "\n")
        return self.out
