"""`eagle-nb record --engine NAME`: flags and wiring for recording on an engine of the registry
that records (cli/record.py's `record` parser gets these flags from `add_args`, and hands over when
--engine is given). Thin: the work is the engine entry's `record` (engines/registry.py).
"""
from __future__ import annotations

import sys


def recorders() -> list[str]:
    """The engines that record a target (registry order)."""
    from eagle_nb.engines.registry import names
    return names(records=True)


def add_args(p) -> None:
    """The `record` flags that choose and configure the engine (and where layer ids come from)."""
    p.add_argument("--engine", choices=recorders(), default=None,
                   help="record on this engine (launched in the engine environment, or --url) instead "
                        "of transformers here; see docs/engine-recording.md")
    p.add_argument("--url", default=None,
                   help="with --engine: a server started with the documented flags and the same "
                        "layer ids (its shared_storage_path must be readable here)")
    p.add_argument("--layers-from", default=None, metavar="DRAFTER",
                   help="take the layer ids from this drafter checkpoint (any format) instead of --layers")
    p.add_argument("--tensor-parallel-size", type=int, default=1, help="with --engine: GPUs per engine")
    p.add_argument("--engine-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for the launched engine server (repeatable), e.g. "
                        "--engine-arg=--gpu-memory-utilization=0.9")
    p.add_argument("--concurrency", type=int, default=8, help="with --engine: requests in flight")
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
    from eagle_nb.cli import options
    from eagle_nb.engines.registry import entry
    from eagle_nb.engines.server import EngineError
    from eagle_nb.io.paths import SHIPPED_TARGET, shipped
    from eagle_nb.io.target_parts import read_text_config
    from eagle_nb.model.targets import resolve_target
    if a.engine is None:
        raise ValueError(f"--url needs --engine {' or '.join(recorders())}")
    if a.device is not None or a.device_map is not None or a.layers_path is not None:
        raise ValueError("--device/--device-map/--layers-path are transformers options; the engine "
                         "places the model itself (--tensor-parallel-size, --engine-arg)")
    target = resolve_target(a.target) if a.target else shipped(SHIPPED_TARGET, "the shipped target")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(target, local_files_only=True, trust_remote_code=a.trust_remote_code)
    ids = layer_ids(a, read_text_config(target).num_hidden_layers, parse)
    prompts = options.prompt_list(a)
    if any(not p for p in prompts):
        raise ValueError("--prompt is empty; give the text to start from, e.g. --prompt 'def f(x):'")
    enc = [tok(p)["input_ids"] for p in prompts]
    e = entry(a.engine)
    dtype = a.dtype or e.dtype           # the entry's default: what the kit's reference loop runs
    try:
        out = e.record(target, enc, a.out, ids, max_new_tokens=a.max_new_tokens,
                       lookahead=a.lookahead, final_hidden=a.final_hidden,
                       eos_token_id=tok.eos_token_id, url=a.url, dtype=dtype,
                       tensor_parallel_size=a.tensor_parallel_size, extra_args=a.engine_arg,
                       concurrency=a.concurrency, target_name=str(a.target or "shipped"))
    except EngineError as err:
        print(f"eagle-nb record: error: {err}", file=sys.stderr)
        return 2
    print(f"recorded {len(enc)} prompts x {a.max_new_tokens}+{a.lookahead} tokens on {e.label} "
          f"({dtype}), HF layers {sorted(ids)}, to {out}")
    return 0
