"""Read the hidden-state files public EAGLE-3 trainers write for offline training, as `Record`s.

  SpecForge  `scripts/prepare_hidden_states.py`: one `*.ckpt` per sample (torch.save of a dict):
             input_ids (T,), loss_mask (T,), aux_hidden_state (1, T, 3H), hidden_state (1, T, H).
  speculators (older `data_generation_offline.py`): one `*.pt` per sample: input_ids (T,),
             hidden_states [aux layers..., last layer] each (T, H), loss_mask (T,).
  speculators (newer): `hs_<i>.safetensors`: token_ids (T,), hidden_states (T, n*H) or (T, n, H),
             aux layers first and, when there is one more layer than the drafter has aux layers,
             the last layer at the end.

These states are teacher-forced on dataset text, not the target's own greedy output: a replay
treats the text after the prompt (`loss_mask` == 1) as the target's continuation, so τ from them
is an ESTIMATE (exact only when the dataset was regenerated greedily by this target).
Pickle files are read with `torch.load(weights_only=True)` only: anything holding code or objects
is refused. Knows nothing about drafters.
"""
from __future__ import annotations

from pathlib import Path

import torch

from eagle_nb.recordings.records import Record, RecordingError

KINDS = {"specforge": "*.ckpt", "speculators-pt": "*.pt", "speculators-safetensors": "hs_*.safetensors"}


def _load_pickle(f: Path) -> dict:
    try:
        d = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001
        raise RecordingError(f"{f}: refused to unpickle with weights_only=True (it holds code or "
                             f"objects, or is corrupt): {type(e).__name__}: {str(e)[:160]}") from None
    if not isinstance(d, dict):
        raise RecordingError(f"{f}: expected a dict of tensors, got {type(d).__name__}")
    return d


def _prompt_len(loss_mask, T: int, f: Path) -> int:
    """Tokens before the first supervised one are the prompt; at least 1, at most T-2."""
    if loss_mask is None:
        raise RecordingError(f"{f}: no loss_mask, so the prompt/continuation boundary is unknown")
    m = torch.as_tensor(loss_mask).flatten()
    if m.numel() != T:
        raise RecordingError(f"{f}: loss_mask has {m.numel()} entries for {T} tokens")
    on = m.nonzero().flatten()
    if on.numel() == 0:
        raise RecordingError(f"{f}: loss_mask is all zero (no continuation to replay)")
    return max(1, min(int(on[0]), T - 2))


def _specforge(f: Path) -> Record:
    d = _load_pickle(f)
    for k in ("input_ids", "aux_hidden_state"):
        if k not in d:
            raise RecordingError(f"{f}: SpecForge sample without {k!r} (keys {sorted(d)}); was it "
                                 f"prepared with --enable-aux-hidden-states?")
    ids = torch.as_tensor(d["input_ids"]).flatten().long()
    aux = d["aux_hidden_state"].reshape(-1, d["aux_hidden_state"].shape[-1])
    final = d.get("hidden_state")
    final = final.reshape(-1, final.shape[-1]) if isinstance(final, torch.Tensor) else None
    if aux.shape[0] != ids.numel():
        raise RecordingError(f"{f}: aux_hidden_state has {aux.shape[0]} positions for {ids.numel()} tokens")
    return Record(f.stem, ids, _prompt_len(d.get("loss_mask"), ids.numel(), f), aux, final)


def _split_layers(hs, f: Path, T: int):
    """(aux (T, n_aux*H), final or None) from a list of (T, H) or a (T, n, H) / (T, n*H) tensor."""
    if isinstance(hs, (list, tuple)):
        layers = [torch.as_tensor(h).reshape(T, -1) for h in hs]
    elif isinstance(hs, torch.Tensor) and hs.dim() == 3:
        layers = list(hs.unbind(1))
    elif isinstance(hs, torch.Tensor) and hs.dim() == 2:
        return hs, None          # already concatenated; the width check happens in the drafter
    else:
        raise RecordingError(f"{f}: hidden_states is {type(hs).__name__}, expected a list or a tensor")
    if len(layers) >= 4:       # speculators' default [2, L//2, L-3, L-1]: aux layers, then the last
        return torch.cat(layers[:-1], -1), layers[-1]
    return torch.cat(layers, -1), None


def _speculators_pt(f: Path) -> Record:
    d = _load_pickle(f)
    if "input_ids" not in d or "hidden_states" not in d:
        raise RecordingError(f"{f}: speculators sample without input_ids/hidden_states (keys {sorted(d)})")
    ids = torch.as_tensor(d["input_ids"]).flatten().long()
    aux, final = _split_layers(d["hidden_states"], f, ids.numel())
    return Record(f.stem, ids, _prompt_len(d.get("loss_mask"), ids.numel(), f), aux, final)


def _speculators_st(f: Path) -> Record:
    from safetensors.torch import load_file
    d = load_file(str(f))
    if "token_ids" not in d or "hidden_states" not in d:
        raise RecordingError(f"{f}: speculators hidden-state file without token_ids/hidden_states (keys {sorted(d)})")
    ids = d["token_ids"].flatten().long()
    aux, final = _split_layers(d["hidden_states"], f, ids.numel())
    return Record(f.stem, ids, _prompt_len(d.get("loss_mask"), ids.numel(), f), aux, final)


READERS = {"specforge": _specforge, "speculators-pt": _speculators_pt,
           "speculators-safetensors": _speculators_st}


def read_foreign(path: Path) -> tuple[dict, dict, object]:
    """(meta, {record name: file}, reader file -> Record) for a directory of SpecForge /
    speculators sample files."""
    path = Path(path)
    if not path.is_dir():
        raise RecordingError(f"{path}: not a recording directory")
    found = {kind: sorted(path.rglob(pat)) for kind, pat in KINDS.items()}
    found = {k: v for k, v in found.items() if v}
    if not found:
        raise RecordingError(f"{path}: no recording.json and no SpecForge (*.ckpt) or speculators "
                             f"(*.pt, hs_*.safetensors) sample files")
    if len(found) > 1:
        raise RecordingError(f"{path}: mixed sample files {sorted(found)}; point at one kind")
    kind, files = next(iter(found.items()))
    meta = {"format": kind, "target": None, "layer_ids_hf": None, "teacher_forced": True,
            "source": f"{kind} offline training data (teacher-forced on dataset text: tau is an estimate)",
            "records": [{"name": f.stem} for f in files], "max_new_tokens": None, "lookahead": None}
    return meta, {f.stem: f for f in files}, READERS[kind]
