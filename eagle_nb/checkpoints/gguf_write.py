"""Write GGUF files llama.cpp loads: a stock HF Llama target, and an EAGLE-3 drafter in any public
format (strictly loaded first), with the target's tokenizer, the layer ids and d2t in llama.cpp's
conventions (`gguf_format.py`). All tensors are written float32 (the kit's reference runs fp32).

`fault=` writes a deliberately broken drafter, the GGUF counterpart of `engines/broken.py`:
- `layer-ids+1` / `layer-ids-1`: `eagle3.target_layers` shifted by one;
- `d2t-absolute`: the offsets stored where llama.cpp expects absolute ids (what a converter that
  took the offsets for ids writes), so draft id i becomes target id `offset[i]`, exactly the kit's
  `d2t-absolute` ablation. (Storing `offset + 2*arange`, the double fix, sends ids past the
  vocabulary.)
The output is written beside `out` and renamed into place; an existing file is replaced only with
`force`. Never executes anything from the checkpoint.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import gguf
import numpy as np
import torch

from eagle_nb.checkpoints.broken import GGUF_FAULTS, GGUF_ID_SHIFTS
from eagle_nb.checkpoints.gguf_format import (
    DRAFT_ARCH,
    KEY_LAYERS,
    KEY_NORM_BEFORE_FC,
    KEY_NORM_BEFORE_RESIDUAL,
    KEY_TARGET_HIDDEN,
    LAYER,
    TARGET_ARCH,
    TOP,
    d2t_absolute,
    layer_tensor_name,
    permute_qk,
)
from eagle_nb.checkpoints.gguf_vocab import add_tokenizer
from eagle_nb.io.files import read_json_object, show
from eagle_nb.io.weight_files import CheckpointError, read_weights
from eagle_nb.model.fault_names import D2T_ABSOLUTE
from eagle_nb.model.layers import eagle3_layers


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def _hparams(w: gguf.GGUFWriter, *, ctx: int, hidden: int, blocks: int, ff: int, heads: int,
             kv_heads: int, eps: float, theta: float, head_dim: int, vocab: int) -> None:
    w.add_context_length(int(ctx))
    w.add_embedding_length(int(hidden))
    w.add_block_count(int(blocks))
    w.add_feed_forward_length(int(ff))
    w.add_head_count(int(heads))
    w.add_head_count_kv(int(kv_heads))
    w.add_layer_norm_rms_eps(float(eps))
    w.add_rope_freq_base(float(theta))
    w.add_key_length(int(head_dim))
    w.add_value_length(int(head_dim))
    w.add_rope_dimension_count(int(head_dim))
    w.add_vocab_size(int(vocab))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)


def _write_atomic(w_fn, out, force: bool) -> Path:
    out = Path(out)
    if out.is_dir():
        raise CheckpointError(f"{show(out)} is a directory; a GGUF destination is a file such as "
                              f"{show(out / 'drafter.gguf')}")
    if out.exists() and not force:
        raise CheckpointError(f"{show(out)} exists; pass force=True (CLI: --force) to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.partial-", dir=out.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)           # mkstemp makes 0600; a plain open() would not
    try:
        w_fn(tmp)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def _finish(w: gguf.GGUFWriter) -> None:
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _rope_theta(c: dict, where: str) -> float:
    params = c.get("rope_parameters") or {}
    if (c.get("rope_scaling") or {}).get("rope_type", "default") not in ("default", None) or \
            params.get("rope_type", "default") != "default":
        raise CheckpointError(f"{where}: rope scaling {c.get('rope_scaling') or params} is not written "
                              "by this converter (plain RoPE only); use llama.cpp's convert_hf_to_gguf.py")
    return float(c.get("rope_theta", params.get("rope_theta", 10000.0)))


def write_target_gguf(src, out, *, force: bool = False) -> Path:
    """A stock HF `LlamaForCausalLM` directory (config.json, safetensors, tokenizer.json) -> GGUF."""
    src = Path(src)
    c = read_json_object(src / "config.json", "config")
    where = show(src / "config.json")
    if "LlamaForCausalLM" not in (c.get("architectures") or []) or c.get("draft_vocab_size"):
        raise CheckpointError(f"{where}: architectures {c.get('architectures')}; a target GGUF is "
                              "written for a stock LlamaForCausalLM only")
    state, wfile = read_weights(src)
    nh, nkv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim") or c["hidden_size"] // nh
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}

    def write(path):
        w = gguf.GGUFWriter(path, arch=TARGET_ARCH)
        w.add_name(src.name)
        _hparams(w, ctx=c["max_position_embeddings"], hidden=c["hidden_size"],
                 blocks=c["num_hidden_layers"], ff=c["intermediate_size"], heads=nh, kv_heads=nkv,
                 eps=c["rms_norm_eps"], theta=_rope_theta(c, where), head_dim=hd, vocab=c["vocab_size"])
        add_tokenizer(w, src)
        for k, t in state.items():
            if k in names:
                w.add_tensor(names[k], _np(t))
                continue
            if not k.startswith("model.layers."):
                raise CheckpointError(f"{show(wfile)}: tensor {k!r} has no llama.cpp name here")
            bid, rest = k[len("model.layers."):].split(".", 1)
            a = _np(t)
            if rest == "self_attn.q_proj.weight":
                a = permute_qk(a, nh, nh)
            elif rest == "self_attn.k_proj.weight":
                a = permute_qk(a, nh, nkv)
            try:
                w.add_tensor(layer_tensor_name(rest, int(bid)), a)
            except KeyError:
                raise CheckpointError(f"{show(wfile)}: tensor {k!r} has no llama.cpp name here") from None
        _finish(w)
    return _write_atomic(write, out, force)


def drafter_layer_ids(cfg, target_dir) -> list[int]:
    """The drafter's aux ids in HF convention (= llama.cpp's), the EAGLE default when implicit."""
    if cfg.aux_layer_ids is not None:
        return list(cfg.aux_layer_ids)
    tc = read_json_object(Path(target_dir) / "config.json", "config")
    tc = {**tc, **(tc.get("text_config") or {})}
    return list(eagle3_layers(int(tc["num_hidden_layers"])))


def write_drafter_gguf(src, out, target, *, fault: str | None = None, force: bool = False) -> Path:
    """An EAGLE-3 drafter (eagle / sglang / speculators format) -> an `eagle3` GGUF that reads
    the target `target` (an HF directory: tokenizer and layer count)."""
    from eagle_nb.checkpoints.load import load_with_report
    if fault is not None and fault not in GGUF_FAULTS:
        raise ValueError(f"unknown GGUF fault {fault!r}; known: {list(GGUF_FAULTS)}")
    if target is None:
        raise CheckpointError("a GGUF drafter needs the target (--target): llama.cpp takes the "
                              "target's tokenizer, and the EAGLE default layer ids need its depth")
    drafter, rep, _ = load_with_report(src, target, torch.float32, None)
    cfg = drafter.config
    if cfg.fc_norm or cfg.norm_output:
        raise CheckpointError(f"{src}: fc_norm={cfg.fc_norm}, norm_output={cfg.norm_output}: "
                              "llama.cpp's eagle3 graph (src/models/eagle3.cpp) has neither")
    ids = drafter_layer_ids(cfg, target)
    if fault in GGUF_ID_SHIFTS:
        ids = [i + GGUF_ID_SHIFTS[fault] for i in ids]
    state = drafter.state_dict()
    d2t = state["d2t"].long().numpy()
    own_embed = bool(rep.notes.get("has_embed_tokens"))
    hd = cfg.head_dim or cfg.hidden_size // cfg.num_attention_heads

    def write(path):
        w = gguf.GGUFWriter(path, arch=DRAFT_ARCH)
        w.add_name(Path(src).name)
        _hparams(w, ctx=cfg.max_position_embeddings, hidden=cfg.hidden_size, blocks=1,
                 ff=cfg.intermediate_size, heads=cfg.num_attention_heads,
                 kv_heads=cfg.num_key_value_heads, eps=cfg.rms_norm_eps, theta=cfg.rope_theta,
                 head_dim=hd, vocab=cfg.vocab_size)
        add_tokenizer(w, target)
        w.add_array(KEY_LAYERS, [int(i) for i in ids])
        w.add_uint32(KEY_TARGET_HIDDEN, int(cfg.target_hidden_size))
        w.add_bool(KEY_NORM_BEFORE_RESIDUAL, bool(cfg.norm_before_residual))
        w.add_bool(KEY_NORM_BEFORE_FC, bool(cfg.norm_before_fc))
        for k, t in state.items():
            if k in ("d2t", "t2d") or (k == "embed_tokens.weight" and not own_embed):
                continue
            if k.startswith("midlayer."):
                rest = k[len("midlayer."):]
                if rest.rpartition(".")[0] not in LAYER:
                    raise CheckpointError(f"{src}: tensor {k!r} has no llama.cpp eagle3 name")
                a = _np(t)
                if rest == "self_attn.q_proj.weight":
                    a = permute_qk(a, cfg.num_attention_heads, cfg.num_attention_heads)
                elif rest == "self_attn.k_proj.weight":
                    a = permute_qk(a, cfg.num_attention_heads, cfg.num_key_value_heads)
                w.add_tensor(layer_tensor_name(rest, 0), a)
            elif k in TOP:
                w.add_tensor(TOP[k], _np(t))
            else:
                raise CheckpointError(f"{src}: tensor {k!r} has no llama.cpp eagle3 name")
        if cfg.draft_vocab_size != cfg.vocab_size or d2t.any() or fault == D2T_ABSOLUTE:
            table = d2t.astype(np.int64) if fault == D2T_ABSOLUTE else d2t_absolute(d2t)
            w.add_tensor("d2t", table, raw_dtype=gguf.GGMLQuantizationType.I64)
        _finish(w)
    return _write_atomic(write, out, force)
