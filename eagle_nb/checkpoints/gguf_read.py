"""`inspect_gguf`: what a GGUF file holds, through the `gguf` package's reader (a memory map of
the file; nothing in it is executed): architecture, hyperparameters, the target layer ids an
`eagle3` drafter reads and their convention, d2t and its verdict, tensor names and shapes, the
tokenizer, and the problems llama.cpp would hit or pass silently (`gguf_format.py` cites the
llama.cpp sources behind each rule). Shapes are GGUF order (ne0 first, the reverse of PyTorch's).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from eagle_nb.checkpoints.gguf_format import (
    DRAFT_ARCH,
    KEY_LAYERS,
    KEY_NORM_BEFORE_FC,
    KEY_NORM_BEFORE_RESIDUAL,
    KEY_TARGET_HIDDEN,
    LAYER_ID_CONVENTION,
    REQUIRED_DRAFT,
)
from eagle_nb.io.files import UserFileError, check_regular, show
from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.model.fault_names import D2T_ABSOLUTE

GGUF_MAGIC = b"GGUF"


def is_gguf(path) -> bool:
    """A regular file that starts with the GGUF magic."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            return p.is_file() and f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def _value(field):
    try:
        v = field.contents()
    except Exception:                       # noqa: BLE001  (an unreadable field is reported, not fatal)
        return "<unreadable>"
    return v


def read_gguf(path) -> tuple[dict, dict]:
    """(metadata without the token lists, {tensor name: {"shape", "type", "data"}})."""
    import gguf
    p = Path(path)
    try:
        check_regular(p, "GGUF file", 1 << 50)
    except UserFileError as e:
        raise CheckpointError(str(e)) from None
    try:
        r = gguf.GGUFReader(str(p))
    except Exception as e:                  # noqa: BLE001  (gguf raises ValueError, struct.error, ...)
        raise CheckpointError(f"{show(p)}: not a readable GGUF file ({type(e).__name__}: {e})") from None
    meta = {}
    for k, f in r.fields.items():
        if k in ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
                 "tokenizer.ggml.scores"):
            meta[k] = {"entries": len(f.data)}
        else:
            meta[k] = _value(f)
    tensors = {t.name: {"shape": [int(x) for x in t.shape], "type": t.tensor_type.name, "data": t.data}
               for t in r.tensors}
    return meta, tensors


def d2t_verdict(d2t: np.ndarray, n_vocab: int) -> tuple[str, str | None]:
    """(verdict, problem or None) for a GGUF d2t, which llama.cpp reads as absolute target ids."""
    d = np.asarray(d2t, dtype=np.int64).reshape(-1)
    in_range = bool(((d >= 0) & (d < n_vocab)).all())
    if in_range and np.unique(d).size == d.size:
        return "absolute target ids (ok: llama.cpp's convention)", None
    plus = d + np.arange(d.size)
    if ((plus >= 0) & (plus < n_vocab)).all() and np.unique(plus).size == d.size:
        return "offsets stored as ids (wrong)", (
            f"d2t holds offsets (i + d2t[i] is a valid id table, d2t itself repeats {d.size - np.unique(d).size} "
            "ids), but llama.cpp reads it as absolute target ids: draft id i becomes target id d2t[i] "
            f"and acceptance collapses (the {D2T_ABSOLUTE} fault); store d2t + arange, as "
            "convert_hf_to_gguf.py does")
    bad = np.nonzero((d < 0) | (d >= n_vocab))[0][:5].tolist()
    return "invalid", (f"d2t ids out of [0, {n_vocab}) at draft ids {bad} or repeated "
                       f"({d.size - np.unique(d).size} duplicates)")


def _tokenizer(meta: dict) -> dict:
    return {k.split("tokenizer.ggml.")[1]: v for k, v in meta.items() if k.startswith("tokenizer.ggml.")}


def inspect_gguf(path, target_config=None) -> dict:
    """A report as a plain dict (`ok`, `problems`, `warnings`, ...). `target_config` (an HF text
    config) adds the checks against the target: layer ids in range, widths, vocabulary."""
    meta, tensors = read_gguf(path)
    arch = meta.get("general.architecture")
    hp = {k.split(".", 1)[1]: v for k, v in meta.items() if isinstance(arch, str) and k.startswith(arch + ".")}
    n_vocab = (meta.get("tokenizer.ggml.tokens") or {}).get("entries", 0)
    rep = {"path": str(path), "format": f"gguf ({arch})", "architecture": arch, "ok": True,
           "hyperparameters": {k: v for k, v in hp.items() if k not in
                               ("target_layers", "target_hidden_size", "norm_before_residual", "norm_before_fc")},
           "tokenizer": _tokenizer(meta), "n_tokens": n_vocab,
           "tensors": {n: (t["shape"], t["type"]) for n, t in tensors.items()},
           "problems": [], "warnings": []}
    probs, warns = rep["problems"], rep["warnings"]
    if arch != DRAFT_ARCH:
        rep["role"] = "target" if "token_embd.weight" in tensors else "unknown"
        if rep["role"] == "unknown":
            probs.append(f"{show(path)}: architecture {arch!r} and no token_embd.weight: neither an "
                         f"eagle3 drafter nor a target llama.cpp can run")
        rep["ok"] = not probs
        return rep
    rep["role"] = "drafter"
    ids = meta.get(KEY_LAYERS)
    rep["target_layers"] = ids
    rep["layer_id_convention"] = LAYER_ID_CONVENTION
    rep["aux_layer_ids_hf"] = ids                 # llama.cpp's ids are HF hidden_states ids
    rep["target_hidden_size"] = meta.get(KEY_TARGET_HIDDEN)
    rep["flags"] = {"norm_before_residual": meta.get(KEY_NORM_BEFORE_RESIDUAL, False),
                    "norm_before_fc": meta.get(KEY_NORM_BEFORE_FC, False)}
    if not isinstance(ids, list) or len(ids) != 3:
        probs.append(f"{show(path)}: {KEY_LAYERS} = {ids!r}; llama.cpp requires exactly 3 entries "
                     "(src/models/eagle3.cpp: \"EAGLE3 requires exactly 3 entries in 'extract_layers'\")")
    elif ids != sorted(ids):
        warns.append(f"{KEY_LAYERS} {ids} is not ascending: llama.cpp concatenates the layers in this "
                     "order, while EAGLE-3 drafters are trained on ascending layers")
    if rep["target_hidden_size"] is None:
        probs.append(f"{show(path)}: no {KEY_TARGET_HIDDEN} (llama.cpp reads it to size fc's input)")
    missing = [n for n in REQUIRED_DRAFT if n not in tensors]
    if missing:
        probs.append(f"{show(path)}: missing tensors {missing} (created as required in src/models/eagle3.cpp)")
    H = hp.get("embedding_length")
    fc = tensors.get("fc.weight")
    if fc and isinstance(ids, list) and rep["target_hidden_size"] and H and \
            fc["shape"] != [len(ids) * rep["target_hidden_size"], H]:
        probs.append(f"fc.weight shape {fc['shape']} != [{len(ids)} x target_hidden_size, embedding_length] "
                     f"= [{len(ids) * rep['target_hidden_size']}, {H}]")
    q = tensors.get("blk.0.attn_q.weight")
    if q and H and q["shape"][0] != 2 * H:
        probs.append(f"blk.0.attn_q.weight takes {q['shape'][0]} inputs, expected 2 x embedding_length = {2 * H}")
    out = tensors.get("output.weight")
    d2t = tensors.get("d2t")
    rep["draft_vocab_size"] = (d2t["shape"][0] if d2t else out["shape"][1] if out else n_vocab)
    if d2t is None:
        rep["d2t_verdict"] = "absent (identity: draft vocab == target vocab)"
        if out and out["shape"][1] != n_vocab:
            probs.append(f"no d2t but output.weight has {out['shape'][1]} rows for {n_vocab} tokens")
    else:
        if d2t["type"] != "I64":
            probs.append(f"d2t type {d2t['type']}, llama.cpp asserts I64 (src/models/eagle3.cpp)")
        rep["d2t_verdict"], p = d2t_verdict(np.asarray(d2t["data"]), n_vocab)
        if p:
            probs.append(p)
        if out and out["shape"][1] != d2t["shape"][0]:
            probs.append(f"output.weight rows {out['shape'][1]} != d2t entries {d2t['shape'][0]}")
    if "output.weight" not in tensors:
        warns.append("no output.weight: llama.cpp uses the TARGET's lm_head over the full vocabulary")
    if target_config is not None:
        _against_target(rep, target_config, n_vocab)
    rep["ok"] = not probs
    return rep


def _against_target(rep: dict, tc, n_vocab: int) -> None:
    from eagle_nb.model.layers import eagle3_layers
    L = int(tc.num_hidden_layers)
    ids = rep.get("target_layers")
    if isinstance(ids, list):
        if any(i > L or i < 0 for i in ids):
            rep["problems"].append(f"{KEY_LAYERS} {ids} outside 0..{L} for a {L}-layer target "
                                   "(llama.cpp aborts: 'EAGLE3: target layer id exceeds target n_layer')")
        elif L in ids:
            rep["warnings"].append(f"{KEY_LAYERS} {ids} holds {L} = n_layer: llama.cpp then reads the "
                                   "target's nextn embeddings, which a Llama target does not produce")
        try:
            default = list(eagle3_layers(L))
        except ValueError:
            default = None
        if default and ids != default:
            shift = {tuple(i + s for i in default): s for s in (-1, 1)}.get(tuple(ids))
            rep["warnings"].append(
                f"{KEY_LAYERS} {ids} differ from the EAGLE default {default} for this target"
                + (f" by {shift:+d} each (an off-by-one between conventions? llama.cpp reads HF ids)"
                   if shift else ""))
    th = rep.get("target_hidden_size")
    if th is not None and th != getattr(tc, "hidden_size", th):
        rep["problems"].append(f"{KEY_TARGET_HIDDEN} {th} != the target's hidden_size {tc.hidden_size}")
    V = getattr(tc, "vocab_size", None)
    if V is not None and n_vocab and n_vocab != V:
        rep["problems"].append(f"the GGUF tokenizer has {n_vocab} tokens, the target's vocab_size is {V}")
