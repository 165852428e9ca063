"""`eagle-nb convert`: write a drafter checkpoint in another format (EAGLE, SGLang/SpecForge,
vLLM/speculators) and say what changed: tensor names, how the layer ids are written, the d2t
verdict, what was decided about embed_tokens. Parses flags, calls `checkpoints.convert`, prints."""
from __future__ import annotations

from eagle_nb.cli import options


def add_parser(sub):
    p = options.command(
        sub, "convert", help="convert a drafter checkpoint between formats",
        description="convert a drafter checkpoint between formats (key maps, layer-id translation)",
        examples="""\
            eagle-nb convert data/drafter_speculators /tmp/d --to sglang
            eagle-nb convert /models/sglang-drafter /tmp/e --to eagle --target /models/target""")
    p.add_argument("src", help="source drafter checkpoint directory (any format)")
    p.add_argument("dst", help="directory to write the converted checkpoint to (new or empty, see --force)")
    p.add_argument("--to", required=True, choices=["eagle", "sglang", "speculators"],
                   help="format to write")
    p.add_argument("--target", default=None,
                   help="target model (HF checkpoint directory or a hub id already in the local "
                        "cache): supplies embed_tokens when the source has none, and tells whether "
                        "the source's own equals the target's")
    p.add_argument("--allow-lossy", action="store_true",
                   help="write even when the destination format cannot express a source feature")
    p.add_argument("--force", action="store_true",
                   help="replace DST entirely when it is a non-empty directory (never allowed when DST "
                        "is SRC)")
    p.add_argument("--drop-embed", action="store_true",
                   help="do not store the source's own embed_tokens (engines then use the target's)")
    return p


def run(a) -> int:
    from eagle_nb.checkpoints.convert import convert
    from eagle_nb.checkpoints.inspect import inspect_checkpoint
    before, _ = inspect_checkpoint(a.src)
    notes: list[str] = []
    out = convert(a.src, a.dst, a.to, target=a.target, allow_lossy=a.allow_lossy, force=a.force,
                  drop_embed=a.drop_embed, notes=notes)
    after, _ = inspect_checkpoint(out)
    print(f"wrote {a.to} checkpoint to {out}")
    for line in conversion_lines(before, after, verbose=a.verbose):
        print(line)
    for n in notes:
        print(n)
    return 0


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
