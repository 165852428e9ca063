"""Real-shaped random EAGLE-3 drafters beside real-config targets (embedding and head only): the
one builder behind the seed case (seed_case.py), the real-size tests and the memory benchmark.

`build(case, out, scale)` writes `out/drafter` (the drafter in its public format: the published
config text, the format's key names and file kind) and `out/target` (the target's config.json
plus a sharded safetensors checkpoint and index holding only the input embedding and the output
head, under the target's own tensor and shard names; no decoder layers, no tokenizer, as for a
large target kept on a GPU cluster). `scale` < 1 divides widths and vocabularies (head counts,
layer counts and layer ids kept; scale 1 writes the config text as published). Weights are random
bf16, written tensor by tensor in chunks: building a Kimi-K2.5 drafter (2.4 GB) and its target's
embedding and head (4.7 GB) takes about 0.5 GB of memory.

The configs ship with the package, in `real_configs/` beside this module; their sources are in
`real_configs/SOURCES.md`. Knows file formats only.

    python -m eagle_nb.checkpoints.real_shaped kimi-k2.5 /tmp/k25 [--scale 1.0] [--crlf]
"""
from __future__ import annotations

import collections
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from eagle_nb.io.stream_write import Planned, write_safetensors, write_torch_bin

CONFIGS = Path(__file__).resolve().parent / "real_configs"
BF16 = torch.bfloat16
WIDTHS = ("hidden_size", "intermediate_size", "moe_intermediate_size", "target_hidden_size",
          "text_hidden_size")
VOCABS = ("vocab_size", "draft_vocab_size")
WIDTH_STEP = 64       # one rule for drafter and target widths, so that equal widths stay equal


@dataclass(frozen=True)
class Case:
    drafter_config: str
    fmt: str                      # eagle | sglang | speculators
    weights: str                  # model.safetensors | pytorch_model.bin
    target_config: str
    embed_key: str
    head_key: str
    shards: tuple[str, str]       # the shard holding the embedding, the one holding the head
    drafter_embed: bool = False   # the drafter stores its own embed_tokens


CASES = {
    "llama-3.1-8b": Case("llama31_8b_eagle3_safeailab.json", "eagle", "pytorch_model.bin",
                         "llama31_8b_instruct.json", "model.embed_tokens.weight", "lm_head.weight",
                         ("model-00001-of-00004.safetensors", "model-00004-of-00004.safetensors")),
    "kimi-k2.5": Case("kimi_k25_eagle3_specforge.json", "sglang", "model.safetensors", "kimi_k25.json",
                      "language_model.model.embed_tokens.weight", "language_model.lm_head.weight",
                      ("model-00062-of-000064.safetensors", "model-00062-of-000064.safetensors")),
    "kimi-k2": Case("kimi_k2_eagle3_specforge.json", "sglang", "model.safetensors",
                    "kimi_k2_instruct.json", "model.embed_tokens.weight", "lm_head.weight",
                    ("model-1-of-61.safetensors", "model-61-of-61.safetensors")),
    "qwen3-235b": Case("qwen3_235b_eagle3_speculators.json", "speculators", "model.safetensors",
                       "qwen3_235b_a22b.json", "model.embed_tokens.weight", "lm_head.weight",
                       ("model-00001-of-00118.safetensors", "model-00118-of-00118.safetensors"),
                       drafter_embed=True),
    "gpt-oss-20b": Case("gpt_oss_20b_eagle3_specforge.json", "sglang", "model.safetensors",
                        "gpt_oss_20b.json", "model.embed_tokens.weight", "lm_head.weight",
                        ("model-00000-of-00002.safetensors", "model-00002-of-00002.safetensors")),
}


def published(name: str) -> dict:
    """A shipped config file (`real_configs/NAME`), parsed."""
    return json.loads((CONFIGS / name).read_text())


def scaled(cfg, scale: float):
    """A copy of a config dict (recursively) with widths divided by 1/scale to multiples of
    WIDTH_STEP, vocabularies to multiples of 8 (both at least 64) and head_dim to even."""
    if isinstance(cfg, list):
        return [scaled(v, scale) for v in cfg]
    if not isinstance(cfg, dict):
        return cfg
    out = {}
    for k, v in cfg.items():
        if isinstance(v, int) and not isinstance(v, bool) and k in (*WIDTHS, *VOCABS, "head_dim"):
            step, least = (2, 2) if k == "head_dim" else (WIDTH_STEP, 64) if k in WIDTHS else (8, 64)
            out[k] = max(least, round(v * scale / step) * step)
        else:
            out[k] = scaled(v, scale)
    return out


def config(name: str, scale: float, crlf: bool = False, edit=None) -> tuple[str, dict]:
    """(text to write, parsed): the published text itself at scale 1 without an edit."""
    text = (CONFIGS / name).read_text()
    cfg = json.loads(text)
    if scale != 1.0 or edit:
        cfg = scaled(cfg, scale)
        if edit:
            edit(cfg)
        text = json.dumps(cfg, indent=2) + "\n"
    return (text.replace("\n", "\r\n") if crlf else text), cfg


def drafter_shapes(cfg: dict, fmt: str, with_embed: bool) -> dict[str, tuple[torch.dtype, tuple]]:
    """{name: (dtype, shape)} of the drafter checkpoint, in the format's own key names."""
    lay = cfg["transformer_layer_config"] if fmt == "speculators" else cfg
    H, inter, nh = lay["hidden_size"], lay["intermediate_size"], lay["num_attention_heads"]
    nkv, hd = lay.get("num_key_value_heads") or nh, lay.get("head_dim") or H // nh
    V = lay["vocab_size"]
    Vd = cfg.get("draft_vocab_size") or lay.get("draft_vocab_size") or V
    Ht = cfg.get("target_hidden_size") or lay.get("target_hidden_size") or H
    ids = cfg.get("eagle_aux_hidden_state_layer_ids") or \
        (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    n_aux = len(ids) if ids else 3
    p = "layers.0." if fmt == "speculators" else "midlayer."
    s = {"fc.weight": (BF16, (H, n_aux * Ht)),
         **({"input_norm.weight": (BF16, (n_aux * Ht,))} if cfg.get("norm_before_fc") else {}),
         **{p + n: (BF16, (H,)) for n in ("hidden_norm.weight", "input_layernorm.weight",
                                           "post_attention_layernorm.weight")},
         p + "self_attn.q_proj.weight": (BF16, (nh * hd, 2 * H)),
         p + "self_attn.k_proj.weight": (BF16, (nkv * hd, 2 * H)),
         p + "self_attn.v_proj.weight": (BF16, (nkv * hd, 2 * H)),
         p + "self_attn.o_proj.weight": (BF16, (H, nh * hd)),
         p + "mlp.gate_proj.weight": (BF16, (inter, H)), p + "mlp.up_proj.weight": (BF16, (inter, H)),
         p + "mlp.down_proj.weight": (BF16, (H, inter)),
         "norm.weight": (BF16, (H,)), "lm_head.weight": (BF16, (Vd, H))}
    if Vd != V:
        s.update({"d2t": (torch.int64, (Vd,)), "t2d": (torch.bool, (V,))})
    if with_embed:
        s["embed_tokens.weight"] = (BF16, (V, H))
    return s


def _producer(name: str, dtype, shape, gen: torch.Generator, ids: torch.Tensor | None, V: int):
    """Chunks of random weights (norms near 1), or the d2t offsets / t2d mask of draft ids `ids`."""
    def chunks():
        if name == "d2t":
            yield ids - torch.arange(ids.numel())
        elif name == "t2d":
            m = torch.zeros(V, dtype=torch.bool)
            m[ids] = True
            yield m
        else:
            n, step = math.prod(shape), 1 << 23
            for i in range(0, n, step):
                x = torch.randn(min(step, n - i), generator=gen)
                yield (1.0 + 0.05 * x if name.endswith("norm.weight") else 0.02 * x).to(dtype)
    return chunks


def write_target(c: Case, t: Path, tcfg: dict, gen: torch.Generator) -> None:
    """The target's embedding and head (none when tied) in their shards, and the shard index."""
    tc = tcfg.get("text_config") or tcfg
    V, H = tc["vocab_size"], tc["hidden_size"]
    shards: dict[str, list[Planned]] = collections.defaultdict(list)
    shards[c.shards[0]].append(Planned(c.embed_key, BF16, (V, H), _producer("e", BF16, (V, H), gen, None, V)))
    if not tc.get("tie_word_embeddings", False):
        shards[c.shards[1]].append(Planned(c.head_key, BF16, (V, H), _producer("h", BF16, (V, H), gen, None, V)))
    for name, planned in shards.items():
        write_safetensors(t / name, planned)
    (t / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": sum(p.nbytes for ps in shards.values() for p in ps)},
         "weight_map": {p.name: name for name, ps in shards.items() for p in ps}}, indent=2) + "\n")


def build(case: str, out, scale: float = 1.0, *, crlf: bool = False, seed: int = 0,
          drafter_edit=None, target_edit=None, weights: str | None = None) -> tuple[Path, Path]:
    """Write `out/drafter` and `out/target` for `case` (see CASES); returns both paths.
    `drafter_edit` / `target_edit` change the parsed configs before writing; `weights` overrides
    the drafter's file kind (model.safetensors / pytorch_model.bin)."""
    if case not in CASES:
        raise ValueError(f"no real-shaped case {case!r}; known: {sorted(CASES)}")
    c = CASES[case]
    d, t = Path(out) / "drafter", Path(out) / "target"
    d.mkdir(parents=True, exist_ok=True)
    t.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    text, tcfg = config(c.target_config, scale, edit=target_edit)
    (t / "config.json").write_text(text, newline="")
    write_target(c, t, tcfg, gen)
    text, dcfg = config(c.drafter_config, scale, crlf, edit=drafter_edit)
    (d / "config.json").write_text(text, newline="")
    lay = dcfg.get("transformer_layer_config") or dcfg
    Vd = dcfg.get("draft_vocab_size") or lay.get("draft_vocab_size") or lay["vocab_size"]
    ids = torch.randperm(lay["vocab_size"], generator=gen)[:Vd].sort().values
    planned = [Planned(k, dt, shape, _producer(k, dt, shape, gen, ids, lay["vocab_size"]))
               for k, (dt, shape) in drafter_shapes(dcfg, c.fmt, c.drafter_embed).items()]
    kind = weights or c.weights
    (write_torch_bin if kind.endswith(".bin") else write_safetensors)(d / kind, planned)
    return d, t


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("out")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--crlf", action="store_true")
    a = ap.parse_args()
    for p in build(a.case, a.out, a.scale, crlf=a.crlf):
        print(p, f"{sum(f.stat().st_size for f in p.iterdir()) / 2**30:.2f} GiB")
