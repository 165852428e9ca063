"""`eagle-nb record --engine vllm`: flags and wiring for recording on a vLLM engine (cli/record.py's
`record` parser gets these flags from `add_args`, and hands over when --engine is not
transformers). Thin: the work is eagle_nb.engines.recorder's.
"""
from __future__ import annotations

import sys

ENGINES = ("transformers", "vllm")


def add_args(p) -> None:
    """The `record` flags that choose and configure the engine (and where layer ids come from)."""
    p.add_argument("--engine", choices=ENGINES, default="transformers",
                   help="who runs the target: transformers here, or vLLM (launched in the engine "
                        "environment, or --url); see docs/engine-recording.md")
    p.add_argument("--url", default=None,
                   help="with --engine vllm: a server started with the documented flags and the same "
                        "layer ids (its shared_storage_path must be readable here)")
    p.add_argument("--layers-from", default=None, metavar="DRAFTER",
                   help="take the layer ids from this drafter checkpoint (any format) instead of --layers")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="with --engine vllm: GPUs per engine")
    p.add_argument("--engine-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for the launched vLLM server (repeatable), e.g. "
                        "--engine-arg=--gpu-memory-utilization=0.9")
    p.add_argument("--concurrency", type=int, default=8, help="with --engine vllm: requests in flight")
    p.add_argument("--trust-remote-code", action="store_true",
                   help="let the target's tokenizer run its own code (e.g. Kimi's tiktoken tokenizer)")


def layer_ids(a, num_layers: int, parse) -> list[int]:
    """HF ids from --layers-from (the drafter's, as its format writes them, translated), else
    --layers via `parse(spec, convention, num_layers)` (cli/options.py `layer_ids`), default eagle3."""
    if a.layers_from is None:
        return parse(a.layers or "eagle3", a.convention, num_layers)
    if a.layers is not None:
        raise ValueError("give --layers or --layers-from, not both")
    from eagle_nb.checkpoints.detect import config_from_dict, detect_format, read_config
    from eagle_nb.model.layers import eagle3_layers
    raw = read_config(a.layers_from)
    ids = config_from_dict(raw, detect_format(raw), f"{a.layers_from}/config.json").aux_layer_ids
    return list(ids) if ids else list(eagle3_layers(num_layers))


def cmd_record_engine(a, parse) -> int:
    from eagle_nb.engines.recorder import record_on_engine
    from eagle_nb.engines.server import EngineError
    from eagle_nb.cli import options
    from eagle_nb.io.paths import SHIPPED_TARGET
    from eagle_nb.io.target_parts import read_text_config
    from eagle_nb.model.targets import resolve_target
    if a.engine == "transformers":
        raise ValueError("--url needs --engine vllm")
    if a.device is not None or a.device_map is not None or a.layers_path is not None:
        raise ValueError("--device/--device-map/--layers-path are transformers options; the engine "
                         "places the model itself (--tensor-parallel-size, --engine-arg)")
    target = resolve_target(a.target) if a.target else SHIPPED_TARGET
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(target, local_files_only=True, trust_remote_code=a.trust_remote_code)
    ids = layer_ids(a, read_text_config(target).num_hidden_layers, parse)
    prompts = options.prompt_list(a)
    if any(not p for p in prompts):
        raise ValueError("--prompt is empty; give the text to start from, e.g. --prompt 'def f(x):'")
    enc = [tok(p)["input_ids"] for p in prompts]
    try:
        out = record_on_engine(target, enc, a.out, ids, max_new_tokens=a.max_new_tokens,
                               lookahead=a.lookahead, final_hidden=a.final_hidden,
                               eos_token_id=tok.eos_token_id, url=a.url, dtype=a.dtype or "auto",
                               tensor_parallel_size=a.tensor_parallel_size, extra_args=a.engine_arg,
                               concurrency=a.concurrency, target_name=str(a.target or "shipped"))
    except EngineError as e:
        print(f"eagle-nb record: error: {e}", file=sys.stderr)
        return 2
    print(f"recorded {len(enc)} prompts x {a.max_new_tokens}+{a.lookahead} tokens on vLLM, HF layers "
          f"{sorted(ids)}, to {out}")
    return 0
