"""`convert`: one public drafter format to another (key maps, layer ids, d2t), refusing what the
destination cannot express and never writing over a directory it was not asked to replace.
"""

from __future__ import annotations

from pathlib import Path

import torch

from eagle_nb.checkpoints.detect import FORMATS, read_config
from eagle_nb.checkpoints.formats import unsupported_features
from eagle_nb.checkpoints.load import load_with_report
from eagle_nb.checkpoints.save import check_dtype, save_drafter, source_dtype
from eagle_nb.checkpoints.validate import Report
from eagle_nb.io.files import AtomicDir, UserFileError, check_destination
from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.model.drafter import Eagle3Drafter


def _embed_policy(rep: Report, drafter: Eagle3Drafter, temb, to: str, drop_embed: bool) -> tuple[bool, str]:
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
    src_dtype = getattr(torch, str(rep.notes.get("dtype")).replace("torch.", ""), torch.float32)
    same = temb is not None and tuple(temb.shape) == tuple(drafter.embed_tokens.weight.shape) and \
        torch.equal(temb.detach().cpu().to(src_dtype).float(), drafter.embed_tokens.weight.detach().float().cpu())
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


def convert(src, dst, to: str, target=None, dtype=None, *, allow_lossy: bool = False,
            force: bool = False, drop_embed: bool = False, notes: list | None = None) -> Path:
    """Strict load in any format, then save in format `to` in the source's dtype (or `dtype`);
    layer ids are translated by the config writers, never copied. Refuses a destination format
    that cannot express the source's features unless `allow_lossy`. `dst` must be new or empty
    unless `force` (then it is replaced entirely); it can never be or contain `src`. The output is
    written to a temporary directory beside `dst` and renamed into place. `notes` (a list)
    receives what was decided about `embed_tokens`, for the CLI to print."""
    if to not in FORMATS:
        raise ValueError(f"unknown format {to!r}; choose from {FORMATS}")
    try:
        check_destination(dst, force, protect=(src, target))
    except UserFileError as e:
        raise CheckpointError(str(e)) from None
    src_dtype = source_dtype(read_config(Path(src)), str(Path(src) / "config.json"))
    out_dtype = src_dtype if dtype is None else check_dtype(dtype, "dtype argument")
    drafter, rep, temb = load_with_report(src, target, torch.float32, None)
    lost = unsupported_features(drafter.config, to)
    if lost and not allow_lossy:
        raise CheckpointError(f"cannot convert {src} to format {to!r}: that format cannot express "
                              f"{lost} (see README 'Formats'); pass allow_lossy=True "
                              f"(CLI: --allow-lossy) to write it anyway; nothing was written")
    store_embed, note = _embed_policy(rep, drafter, temb, to, drop_embed)
    with AtomicDir(dst) as tmp:
        save_drafter(drafter, tmp, to, dtype=out_dtype, allow_lossy=allow_lossy, embed=store_embed)
    if notes is not None:
        notes.append(note)
    return Path(dst)
