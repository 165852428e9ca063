"""`convert`: one public drafter format to another (key maps, layer ids, d2t), refusing what the
destination cannot express and never writing over a directory it was not asked to replace.

Streams: the source is validated from its headers and small tensors (checkpoints/inspect.py),
then every tensor is read, renamed, cast chunk by chunk if the dtype changes, checked for NaN/inf
and written (io/stream_write.py), so memory holds about one chunk whatever the drafter's size.
The target's embedding is read only when the destination stores it or must be compared with the
source's own. The output goes to a temporary directory renamed into place (io/files.py).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import torch

from eagle_nb.checkpoints.detect import FORMATS, CheckpointWarning, expected_shapes, read_config
from eagle_nb.checkpoints.formats import unsupported_features
from eagle_nb.checkpoints.inspect import inspect_checkpoint
from eagle_nb.checkpoints.load import EMBED, complete_vocab_buffers, target_embedding
from eagle_nb.checkpoints.save import check_dtype, config_to_dict, source_dtype
from eagle_nb.checkpoints.validate import Report
from eagle_nb.io.files import AtomicDir, UserFileError, check_destination
from eagle_nb.io.lazy_weights import stream
from eagle_nb.io.stream_write import Planned, write_safetensors
from eagle_nb.io.weight_files import CheckpointError

CHUNK_ELEMENTS = 16 << 20


def _equal_streamed(a_state: dict, b_state: dict, dtype: torch.dtype) -> bool:
    """a == b (flattened) with b rounded to `dtype`, compared chunk by chunk."""
    a = stream(a_state, EMBED, CHUNK_ELEMENTS * a_state[EMBED].element_size())
    b = stream(b_state, EMBED, CHUNK_ELEMENTS * b_state[EMBED].element_size())
    return all(torch.equal(x.float(), y.to(dtype).float()) for x, y in zip(a, b, strict=True))


def _embed_policy(rep: Report, state: dict, tstate: dict, to: str, drop_embed: bool) -> tuple[bool, str]:
    """(store embed_tokens in the output?, the sentence saying so). A drafter's own embedding is
    never dropped silently: SGLang replaces it with the target's (docs/reliability.md),
    so format B needs `drop_embed` unless the two are identical."""
    own = rep.notes.get("has_embed_tokens")
    if to == "speculators":
        return True, ("embed_tokens: stored, the source's own" if own else
                      "embed_tokens: stored, taken from the target (the source has none)")
    if not own:
        return False, "embed_tokens: not stored (the source has none); engines use the target's"
    # the source may store the target's embedding rounded to its own dtype (fp16 drafters do)
    src_dtype = state[EMBED].dtype
    temb = tstate.get(EMBED)
    same = temb is not None and tuple(temb.shape) == tuple(state[EMBED].shape) and \
        _equal_streamed(state, tstate, src_dtype)
    if same:
        return False, (f"embed_tokens: not stored; the source's own is the target's (equal at the "
                       f"source's {str(src_dtype).replace('torch.', '')} precision)")
    if drop_embed:
        return False, ("embed_tokens: NOT stored (--drop-embed): the engines will use the TARGET's "
                       "embedding, not the one this drafter was trained with")
    if to == "eagle":
        return True, ("embed_tokens: stored, the source's own (vLLM loads a drafter's own embedding "
                      "when present; SGLang always uses the target's)")
    diff = "" if temb is None else " and differs from the target's"
    raise CheckpointError(
        f"the source drafter carries its own embed_tokens{diff}, but SGLang replaces a drafter's "
        f"embedding with the target's, so the converted drafter would not be the same model. Convert "
        f"to 'eagle' or 'speculators' (both keep it), pass --target if the embedding is the "
        f"target's (checked for equality), or pass --drop-embed (drop_embed=True) to accept the "
        f"target's embedding; nothing was written")


def _checked(src, key: str, chunks, dtype: torch.dtype):
    """The chunks cast to `dtype`, refusing NaN/inf (the output is then never renamed into place)."""
    for c in chunks:
        if c.is_floating_point():
            if not bool(torch.isfinite(c).all()):
                raise CheckpointError(f"cannot convert {src}: NaN/inf values in weights: [{key!r}]; "
                                      f"nothing was written")
            c = c.to(dtype)
        yield c


def _plan(src, rep: Report, state: dict, tstate: dict, to: str, dtype, store_embed: bool) -> list[Planned]:
    """Every output tensor in the drafter's own order, each read from where it lives when written."""
    small = {k: state[k] for k in ("d2t", "t2d") if k in state}
    complete_vocab_buffers(rep.config, small)
    plan = []
    for k, shape in expected_shapes(rep.config).items():
        where = small if k in small else tstate if k == EMBED and k not in state else state
        if k == EMBED and not store_embed or k not in where:
            continue
        t = where[k]
        out_dtype = dtype if t.is_floating_point() else t.dtype
        name = "layers.0." + k[len("midlayer."):] if to == "speculators" and k.startswith("midlayer.") else k
        plan.append(Planned(name, out_dtype, shape,
                            lambda w=where, k=k, d=out_dtype: _checked(src, k, stream(w, k), d)))
    return plan


def convert(src, dst, to: str, target=None, dtype=None, *, allow_lossy: bool = False,
            force: bool = False, drop_embed: bool = False, notes: list | None = None) -> Path:
    """Strict validation in any format, then write format `to` in the declared dtype (config
    `dtype`/`torch_dtype`; the file's own when none is declared), or `dtype`; layer ids are
    translated by the config writers, never copied. Refuses a destination format that cannot
    express the source's features unless `allow_lossy`. `dst` must be new or empty unless `force`
    (then it is replaced entirely); it can never be or contain `src`. The output is written to a
    temporary directory beside `dst` and renamed into place. `notes` (a list) receives what was
    decided about `embed_tokens`, for the CLI to print."""
    if to not in FORMATS:
        raise ValueError(f"unknown format {to!r}; choose from {FORMATS}")
    try:
        check_destination(dst, force, protect=(src, target))
    except UserFileError as e:
        raise CheckpointError(str(e)) from None
    declared = source_dtype(read_config(Path(src)), str(Path(src) / "config.json"), default=None)
    out_dtype = None if dtype is None else check_dtype(dtype, "dtype argument")
    tcfg, tstate = target_embedding(target)
    rep, state = inspect_checkpoint(src, tcfg)
    cfg = rep.config
    if EMBED not in state:
        temb = tstate.get(EMBED)
        if temb is None:
            rep.problems.append(f"{src}: checkpoint has no embed_tokens.weight; pass target= "
                                f"(a path or model) to take it from the target")
        elif tuple(temb.shape) != (cfg.vocab_size, cfg.hidden_size):
            rep.problems.append(f"target embedding {tuple(temb.shape)} != (vocab_size, hidden_size)"
                                f" = ({cfg.vocab_size}, {cfg.hidden_size})")
    if not rep.ok:
        raise CheckpointError(f"cannot load drafter {src} (format {rep.format}):\n  - "
                              + "\n  - ".join(rep.problems))
    for w in rep.warnings:
        if "not drafter state" in w:
            warnings.warn(w, CheckpointWarning, stacklevel=2)
    lost = unsupported_features(cfg, to)
    if lost and not allow_lossy:
        raise CheckpointError(f"cannot convert {src} to format {to!r}: that format cannot express "
                              f"{lost} (see README 'Formats'); pass allow_lossy=True "
                              f"(CLI: --allow-lossy) to write it anyway; nothing was written")
    out_dtype = out_dtype or declared or state["fc.weight"].dtype
    store_embed, note = _embed_policy(rep, state, tstate, to, drop_embed)
    plan = _plan(src, rep, state, tstate, to, out_dtype, store_embed)
    with AtomicDir(dst) as tmp:
        text = json.dumps(config_to_dict(cfg, to, str(out_dtype).replace("torch.", "")), indent=2)
        (tmp / "config.json").write_text(text + "\n")
        write_safetensors(tmp / "model.safetensors", plan)
    if notes is not None:
        notes.append(note)
    return Path(dst)


def conversion_lines(before, after, verbose: bool = False) -> list[str]:
    """What a conversion changed, from the validation reports of source and destination: tensor
    names (aligned on eagle_nb's own name), how the layer ids are written, the d2t verdict."""
    src = {ours: key for key, (ours, _) in before.key_names.items() if ours}
    dst = {ours: key for key, (ours, _) in after.key_names.items() if ours}
    renamed = [(src[o], dst[o]) for o in sorted(src) if o in dst and src[o] != dst[o]]
    lines = [f"format {before.format} -> {after.format}; {len(renamed)} of {len(dst)} tensors renamed"
             + (":" if renamed else "")]
    lines += [f"  {s} -> {d}" for s, d in (renamed if verbose else renamed[:6])]
    if len(renamed) > 6 and not verbose:
        lines.append(f"  ... and {len(renamed) - 6} more (--verbose lists all)")
    missing = sorted(set(src) - set(dst))
    if missing:
        lines.append(f"  not written: {', '.join(missing)}")

    def ids(rep):
        w = rep.ids_as_written
        return ("not written (EAGLE default)" if w is None else
                f"{w['ids']} in eagle_config (output-of-layer ids)" if w["convention"] == "sglang-config"
                else f"{w['ids']} at top level (HF ids)")
    lines.append(f"layer ids: {ids(before)} -> {ids(after)}")
    lines.append(f"d2t: {before.d2t_verdict} -> {after.d2t_verdict}")
    return lines
