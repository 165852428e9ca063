"""`eagle-nb record`: the target's greedy continuations of prompts and the hidden states EAGLE-3
captures, written as a recording that `speculate --features` replays without the target. Parses
flags, calls `recordings.recording.record`, prints where it wrote."""
from __future__ import annotations

from eagle_nb.cli import options
from eagle_nb.cli.record_engine import add_args as add_engine_args
from eagle_nb.cli.record_engine import cmd_record_engine, layer_ids


def add_parser(sub):
    p = options.command(
        sub, "record", help="record the target's greedy tokens and aux states",
        description="record the target's greedy continuations and the hidden states EAGLE-3\n"
                    "captures, for `eagle-nb speculate --features` to replay without the target",
        examples="""\
            eagle-nb record --prompts data/eval_prompts.jsonl --out /tmp/rec
            eagle-nb record --engine vllm --prompts data/eval_prompts.jsonl --out /tmp/rec
            eagle-nb speculate --features /tmp/rec --depth 4""")
    options.target(p)
    options.prompts(p)
    p.add_argument("--out", required=True, help="recording directory to write")
    options.layers(p, default=None)       # None: eagle3, or the drafter's (--layers-from)
    options.max_new_tokens(p, 64)
    p.add_argument("--lookahead", type=int, default=8, help="extra tokens: replays exact up to this depth")
    p.add_argument("--final-hidden", action="store_true", help="also store the final (post-norm) state")
    options.device(p)
    p.add_argument("--device-map", default=None, help="passed to from_pretrained, e.g. auto")
    p.add_argument("--dtype", default=None,
                   help="dtype to run the target in, e.g. float32, bfloat16 or auto (default: "
                        "from_pretrained's here; with --engine, the engine entry's, float32 for vLLM: "
                        "the kit's reference loop runs the target in float32); written into the recording")
    add_engine_args(p)
    return p


def run(a) -> int:
    from eagle_nb.recordings.recording import record
    from eagle_nb.model.decoder import num_decoder_layers
    from eagle_nb.model.limits import encode
    from eagle_nb.model.targets import load_target
    if a.engine is not None or a.url:
        return cmd_record_engine(a, options.layer_ids)
    model, tok = load_target(a.target, device=a.device, dtype=a.dtype, device_map=a.device_map)
    ids = layer_ids(a, num_decoder_layers(model, a.layers_path), options.layer_ids)
    prompts = options.prompt_list(a)
    enc = [encode(tok, p, f"prompt {i}") for i, p in enumerate(prompts)]
    out = record(model, enc, a.out, ids, max_new_tokens=a.max_new_tokens, lookahead=a.lookahead,
                 target_name=str(a.target or "shipped"), final_hidden=a.final_hidden,
                 layers_path=a.layers_path, eos_token_id=tok.eos_token_id, texts=prompts)
    print(f"recorded {len(enc)} prompts x {a.max_new_tokens}+{a.lookahead} tokens, HF layers {ids}, to {out}")
    return 0
