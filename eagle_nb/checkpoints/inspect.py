"""`inspect_checkpoint`: what a drafter directory holds (format, ids as written and in HF
convention, tensor names and shapes, d2t verdict, problems), without building the drafter.

Reads the weight files' headers and only the small tensors it validates (d2t, t2d, norms): the
returned state dict holds memory-mapped views (io/lazy_weights.py), so inspecting a 1T-target
drafter costs what its headers cost. `scan=True` also streams every tensor for NaN/inf in
bounded memory; loading, converting and the doctor always check every value.
"""

from __future__ import annotations

from pathlib import Path

from eagle_nb.checkpoints.detect import (
    OPTIONAL,
    config_from_dict,
    detect_format,
    expected_shapes,
    ids_as_written_in,
    read_config,
    rename,
)
from eagle_nb.checkpoints.formats import split_harmless, train_serve_warnings
from eagle_nb.checkpoints.validate import (
    Report,
    check_against_target,
    check_d2t_t2d,
    check_fc_width,
    check_finite,
    check_finite_streamed,
    check_shapes,
)
from eagle_nb.io.files import show
from eagle_nb.io.lazy_weights import LazyState, open_weights
from eagle_nb.io.weight_files import CheckpointError
from eagle_nb.model.config import ConfigError
from eagle_nb.model.layers import eagle3_layers


SMALL = 1 << 20      # elements: a tensor this small is read and checked by every inspection


def inspect_checkpoint(path, target_config=None, *, scan: bool = False) -> tuple[Report, dict]:
    """Read and validate without building a model. Returns (report, renamed state dict of
    memory-mapped views, a `LazyState`). `scan` streams every tensor for NaN/inf."""
    path = Path(path)
    rep = Report(str(path))
    raw_cfg = read_config(path)
    try:
        rep.format = detect_format(raw_cfg)
    except CheckpointError as e:
        raise CheckpointError(f"{show(path / 'config.json')}: {e}") from None
    try:
        rep.config = cfg = config_from_dict(raw_cfg, rep.format, str(path / "config.json"))
    except (ConfigError, KeyError, TypeError) as e:
        raise CheckpointError(f"{show(path / 'config.json')}: {e}") from None
    rep.ids_as_written = ids_as_written_in(raw_cfg)
    raw = open_weights(path)
    wfile = raw.file
    rep.notes["weights_file"] = wfile.name
    origin: dict = {}
    state, unexpected = rename(raw, rep.format, origin)
    state = LazyState(state, raw, origin)
    rep.unexpected, ignored, notes = split_harmless(unexpected, str(wfile))
    for note in notes:
        rep.warn("ignored-keys", note)
    rep.notes["ignored_extras"] = ignored
    ours_of = {ck: ours for ours, ck in origin.items()}
    rep.key_names = {k: (ours_of.get(k), tuple(v.shape)) for k, v in raw.items()}
    try:
        shapes = expected_shapes(cfg)
    except ConfigError as e:            # e.g. a rope_scaling type the drafter does not implement
        raise CheckpointError(f"{show(path / 'config.json')}: {e}") from None
    for k in [k for k in state if k not in shapes]:   # e.g. q_norm under `midlayer.`: no such param
        rep.unexpected.append(origin.get(k, k))
        del state[k]
    rep.missing = [k for k in shapes if k not in state and k not in OPTIONAL]
    if rep.missing or rep.unexpected:
        hint = ""
        if any(k.startswith("layers.0.") for k in rep.unexpected):
            hint = " (`layers.0.*` are speculators-format names; this config says format " \
                   f"{rep.format!r}, which uses `midlayer.*`)"
        elif any(k.startswith("midlayer.") for k in rep.unexpected):
            hint = " (`midlayer.*` are EAGLE/SGLang names in a speculators-format checkpoint)"
        rep.problem("keys", f"{wfile}: missing keys {rep.missing}, unexpected keys {rep.unexpected}{hint}")
    quantized = {k: str(v.dtype).replace("torch.", "") for k, v in state.items()
                 if k not in ("d2t", "t2d") and not v.is_floating_point()}
    if quantized:
        raise CheckpointError(
            f"{show(wfile)}: quantized drafter weights are not supported: "
            f"{dict(list(quantized.items())[:4])}{' ...' if len(quantized) > 4 else ''} are integer "
            f"tensors (int8/uint8/int4 packing needs scales this kit does not read); load the "
            f"unquantized bf16/fp16/fp32 checkpoint instead")
    check_shapes(state, {k: v for k, v in shapes.items() if k not in ("d2t", "t2d")}, rep, str(wfile))
    check_fc_width(state, cfg, rep)
    if scan:
        check_finite_streamed(state, rep)
    else:
        check_finite({k: v for k, v in state.items() if v.numel() <= SMALL}, rep)
    check_d2t_t2d(state.get("d2t"), state.get("t2d"), cfg, rep)
    emb = state.get("embed_tokens.weight")
    rep.notes["has_embed_tokens"] = emb is not None
    if target_config is not None:
        check_against_target(cfg, target_config, None if emb is None else emb.shape, rep)
    if cfg.aux_layer_ids is None:   # format A / B without ids: the EAGLE default, implicit
        L = getattr(target_config, "num_hidden_layers", None)
        rep.notes["aux_layer_ids_implied"] = (list(eagle3_layers(L)) if L else
                                              "EAGLE default {2, L//2, L-3} (pass --target to resolve)")
    for w in train_serve_warnings(raw_cfg, cfg, rep.format):
        rep.warn("train-serve", w)
    if "ids_disagree" in cfg.extra:
        rep.warn("ids-disagree", cfg.extra["ids_disagree"] + "; eagle_nb uses the eagle_config field")
    rep.notes["num_params"] = int(sum(v.numel() for v in state.values() if v.is_floating_point()))
    rep.notes["dtype"] = str(next((v.dtype for v in state.values() if v.is_floating_point()), None))
    return rep, state
