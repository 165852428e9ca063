"""`eagle-nb convert`: write a drafter checkpoint in another format of the format registry
(EAGLE, SGLang/SpecForge, vLLM/speculators, llama.cpp GGUF) and say what changed: tensor names,
how the layer ids are written, the d2t verdict, what was decided about embed_tokens. Parses flags,
calls the format entry's writer (`checkpoints.registry`), prints."""
from __future__ import annotations

from eagle_nb.cli import options
from eagle_nb.io import paths


def add_parser(sub):
    D, T = options.shown(paths.SHIPPED_DRAFTER), options.shown(paths.SHIPPED_TARGET)
    p = options.command(
        sub, "convert", help="convert a drafter checkpoint between formats",
        description="convert a drafter checkpoint between formats (key maps, layer-id translation)",
        examples=f"""\
            eagle-nb convert {D} /tmp/d --to sglang
            eagle-nb convert /models/sglang-drafter /tmp/e --to eagle --target /models/target
            eagle-nb convert {D} /tmp/drafter.gguf --to gguf --target {T}
            eagle-nb convert {T} /tmp/target.gguf --to gguf""")
    p.add_argument("src", help="source drafter checkpoint directory (any format)")
    p.add_argument("dst", help="directory to write the converted checkpoint to (new or empty, see "
                               "--force; a file with --to gguf)")
    from eagle_nb.checkpoints.broken import GGUF_FAULTS
    from eagle_nb.checkpoints.registry import REGISTRY
    p.add_argument("--to", required=True, choices=[f.name for f in REGISTRY],
                   help="format to write: " + "; ".join(f"{f.name}: {f.what}" for f in REGISTRY))
    p.add_argument("--fault", default=None, choices=GGUF_FAULTS,
                   help="with --to gguf: write a deliberately broken drafter, to show llama.cpp a "
                        "named fault")
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
    from eagle_nb.checkpoints.registry import entry
    out, lines = entry(a.to).write(a.src, a.dst, target=a.target, force=a.force, fault=a.fault,
                                   allow_lossy=a.allow_lossy, drop_embed=a.drop_embed, verbose=a.verbose)
    for line in lines:
        print(line)
    return 0
