"""The kit's own story as files: a real-shaped EAGLE-3 drafter, a target that cannot run here, and
what the engine reported, written into a directory for the doctor to judge.

`build_seed_case("kimi-k2.5", out)` writes
  out/drafter/  the SpecForge Kimi-K2.5 draft config (published text) and `model.safetensors` with
                SpecForge's key names (`midlayer.*`, `fc` 3 x 7168 -> 7168, `lm_head`, `d2t`, `t2d`),
  out/target/   the published target `config.json` and a sharded checkpoint that holds only the
                input embedding and the head, under the target's real tensor and shard names (no
                decoder layers, no tokenizer, as for a 1T-parameter target kept on a GPU cluster),
  out/sglang.log  SGLang decode lines `accept len: 1.05, accept rate: 0.21` (5 draft tokens, k = 4).
Targets: "kimi-k2.5" (the multimodal wrapper `KimiK25ForConditionalGeneration`), "kimi-k2" (the text
decoder `DeepseekV3ForCausalLM`); "llama-3.1-8b" writes a SafeAILab EAGLE-3 drafter
(`pytorch_model.bin`) against Llama-3.1-8B-Instruct, observed as tau 1.3 at depth 3.

`scale` < 1 divides widths and vocabularies (head counts, layer counts and layer ids kept) so
that tests run in seconds; at scale 1 the config text is the published one. Weights are random.
The configs and their sources are in tests/fixtures/real_configs/. Knows file formats only.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from eagle_nb.io.paths import REPO_ROOT

CONFIGS = REPO_ROOT / "tests" / "fixtures" / "real_configs"
WIDTHS = ("hidden_size", "intermediate_size", "moe_intermediate_size", "target_hidden_size",
          "text_hidden_size")
VOCABS = ("vocab_size", "draft_vocab_size")
SGLANG_LINE = ("[2026-04-20 10:{m:02d}:{s:02d} TP0] Decode batch, #running-req: 1, #token: {t}, "
               "token usage: 0.00, accept len: 1.05, accept rate: 0.21, cuda graph: True, "
               "gen throughput (token/s): 41.{d}0, #queue-req: 0")


@dataclass(frozen=True)
class Case:
    drafter_config: str
    weights: str                       # the drafter's weights file name
    target_config: str
    embed_key: str
    head_key: str
    shards: tuple[str, str]            # shard file of the embedding, of the head
    observed: str                      # what the engine reported: 'sglang.log' or 'tau 1.3 at depth 3'


KIMI_DRAFTER = "specforge_kimi-k25-eagle3.json"
CASES = {
    "kimi-k2.5": Case(KIMI_DRAFTER, "model.safetensors", "moonshotai_Kimi-K2.5.json",
                      "language_model.model.embed_tokens.weight", "language_model.lm_head.weight",
                      ("model-00062-of-000064.safetensors",) * 2, "sglang.log"),
    "kimi-k2": Case(KIMI_DRAFTER, "model.safetensors", "moonshotai_Kimi-K2-Instruct.json",
                    "model.embed_tokens.weight", "lm_head.weight",
                    ("model-1-of-61.safetensors", "model-61-of-61.safetensors"), "sglang.log"),
    "llama-3.1-8b": Case("safeailab_eagle3_llama31_8b.json", "pytorch_model.bin",
                         "meta-llama_Llama-3.1-8B-Instruct.json", "model.embed_tokens.weight",
                         "lm_head.weight", ("model-00001-of-00004.safetensors",
                                            "model-00004-of-00004.safetensors"), "tau 1.3 at depth 3"),
}


@dataclass(frozen=True)
class SeedCase:
    name: str
    drafter: Path
    target: Path
    log: Path | None                   # the engine log, when the case has one
    observed_tau: float | None = None  # else the numbers the engine reported
    depth: int | None = None


def scaled(cfg, scale: float, widths=WIDTHS, width_step: int = 8):
    """A copy of a config dict (recursively) with the `widths` keys divided by 1/scale to multiples
    of `width_step`, vocabularies to multiples of 8 (both at least 64) and head_dim to even. The
    real-size tests use it with a step of 64, so drafter and target widths stay equal."""
    if isinstance(cfg, list):
        return [scaled(v, scale, widths, width_step) for v in cfg]
    if not isinstance(cfg, dict):
        return cfg
    out = {}
    for k, v in cfg.items():
        if isinstance(v, int) and not isinstance(v, bool) and k in (*widths, *VOCABS, "head_dim"):
            step, least = (2, 2) if k == "head_dim" else (width_step, 64) if k in widths else (8, 64)
            out[k] = max(least, round(v * scale / step) * step)
        else:
            out[k] = scaled(v, scale, widths, width_step)
    return out


def config_text(name: str, scale: float) -> tuple[str, dict]:
    """(text to write, parsed dict): the published text itself at scale 1."""
    text = (CONFIGS / name).read_text()
    if scale == 1:
        return text, json.loads(text)
    cfg = scaled(json.loads(text), scale)
    return json.dumps(cfg, indent=2) + "\n", cfg


def drafter_state(cfg: dict, gen: torch.Generator, dtype: torch.dtype) -> dict:
    """Random weights under the EAGLE / SpecForge names (`midlayer.*`), shapes from the config."""
    H, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    nh = cfg["num_attention_heads"]
    kv, hd = cfg.get("num_key_value_heads") or nh, cfg.get("head_dim") or H // nh
    Vd = cfg.get("draft_vocab_size") or V
    ids = (cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids") or [0, 0, 0]
    shapes = {"fc.weight": (H, len(ids) * cfg.get("target_hidden_size", H)),
              "midlayer.hidden_norm.weight": (H,), "midlayer.input_layernorm.weight": (H,),
              "midlayer.self_attn.q_proj.weight": (nh * hd, 2 * H),
              "midlayer.self_attn.k_proj.weight": (kv * hd, 2 * H),
              "midlayer.self_attn.v_proj.weight": (kv * hd, 2 * H),
              "midlayer.self_attn.o_proj.weight": (H, nh * hd),
              "midlayer.post_attention_layernorm.weight": (H,),
              "midlayer.mlp.gate_proj.weight": (I, H), "midlayer.mlp.up_proj.weight": (I, H),
              "midlayer.mlp.down_proj.weight": (H, I), "norm.weight": (H,), "lm_head.weight": (Vd, H)}
    st = {k: ((1 + 0.05 * torch.randn(s, generator=gen)) if k.endswith("norm.weight")
              else 0.02 * torch.randn(s, generator=gen)).to(dtype) for k, s in shapes.items()}
    if Vd < V:      # the draft vocabulary: Vd target ids; d2t holds offsets, t2d marks them
        keep = torch.randperm(V, generator=gen)[:Vd].sort().values
        st["d2t"] = keep - torch.arange(Vd)
        st["t2d"] = torch.zeros(V, dtype=torch.bool).index_fill_(0, keep, True)
    return st


def _write_target(case: Case, out: Path, cfg: dict, gen: torch.Generator) -> None:
    from safetensors.torch import save_file
    text = cfg.get("text_config") or cfg
    V, H = text["vocab_size"], text["hidden_size"]
    shards: dict[str, dict] = {}
    for key, shard in zip((case.embed_key, case.head_key), case.shards):
        shards.setdefault(shard, {})[key] = (0.02 * torch.randn(V, H, generator=gen)).to(torch.bfloat16)
    for shard, tensors in shards.items():
        save_file(tensors, str(out / shard), metadata={"format": "pt"})
    size = sum(t.numel() * t.element_size() for ts in shards.values() for t in ts.values())
    wm = {k: s for s, ts in shards.items() for k in ts}
    index = {"metadata": {"total_size": size}, "weight_map": wm}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def sglang_log(lines: int = 6) -> str:
    """SGLang decode-batch log lines as SGLang (<= 0.5.10, `scheduler_metrics_mixin.py`) prints them."""
    return "\n".join(SGLANG_LINE.format(m=i // 6, s=(10 * i) % 60, t=512 + 40 * i, d=i % 10)
                     for i in range(lines)) + "\n"


def build_seed_case(name: str, out, scale: float = 1 / 64, seed: int = 0) -> SeedCase:
    """Write case `name` (see CASES) under `out`; returns where its parts are."""
    from safetensors.torch import save_file
    case = CASES[name]
    out = Path(out)
    d, t = out / "drafter", out / "target"
    d.mkdir(parents=True, exist_ok=True)
    t.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    ttext, tcfg = config_text(case.target_config, scale)
    (t / "config.json").write_text(ttext)
    _write_target(case, t, tcfg, gen)
    dtext, dcfg = config_text(case.drafter_config, scale)
    (d / "config.json").write_text(dtext)
    dtype = torch.float16 if dcfg.get("torch_dtype") == "float16" else torch.bfloat16
    st = drafter_state(dcfg, gen, dtype)
    if case.weights.endswith(".bin"):
        torch.save(st, d / case.weights)
    else:
        save_file(st, str(d / case.weights), metadata={"format": "pt"})
    if case.observed == "sglang.log":
        (out / "sglang.log").write_text(sglang_log())
        return SeedCase(name, d, t, out / "sglang.log")
    tau, depth = (float(x) for x in case.observed.replace("tau ", "").split(" at depth "))
    return SeedCase(name, d, t, None, tau, int(depth))

