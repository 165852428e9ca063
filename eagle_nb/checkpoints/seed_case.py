"""The kit's own story as files: a real-shaped EAGLE-3 drafter, a target that cannot run here, and
what the engine reported, written into a directory for the doctor to judge.

`build_seed_case("kimi-k2.5", out)` writes
  out/drafter/  the SpecForge Kimi-K2.5 draft config (published text) and `model.safetensors` with
                SpecForge's key names (`midlayer.*`, `fc` 3 x 7168 -> 7168, `lm_head`, `d2t`, `t2d`),
  out/target/   the published target `config.json` and a sharded checkpoint that holds only the
                input embedding and the head, under the target's real tensor and shard names (no
                decoder layers, no tokenizer, as for a 1T-parameter target kept on a GPU cluster),
  out/sglang.log  SGLang decode lines `accept len: 1.05, accept rate: 0.21` (5 draft tokens, k = 4).
Cases: "kimi-k2.5" (the multimodal wrapper `KimiK25ForConditionalGeneration`), "kimi-k2" (the text
decoder `DeepseekV3ForCausalLM`, with SpecForge's Kimi-K2 drafter), both observed by that log;
"llama-3.1-8b" (a SafeAILab EAGLE-3 drafter, `pytorch_model.bin`, against Llama-3.1-8B-Instruct),
observed as tau 1.3 at depth 3.

The files are written by real_shaped.py (its `build`, the configs shipped with the package), at
`scale` 1/64 by default so that the doctor judges them in seconds. Weights are random. Knows file
formats and an engine's log lines only.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle_nb.checkpoints.real_shaped import build

SGLANG_LINE = ("[2026-04-20 10:{m:02d}:{s:02d} TP0] Decode batch, #running-req: 1, #token: {t}, "
               "token usage: 0.00, accept len: 1.05, accept rate: 0.21, cuda graph: True, "
               "gen throughput (token/s): 41.{d}0, #queue-req: 0")
# case -> what the engine reported: "sglang.log" (written beside the case), or (tau, depth)
OBSERVED = {"kimi-k2.5": "sglang.log", "kimi-k2": "sglang.log", "llama-3.1-8b": (1.3, 3)}


@dataclass(frozen=True)
class SeedCase:
    name: str
    drafter: Path
    target: Path
    log: Path | None                   # the engine log, when the case has one
    observed_tau: float | None = None  # else the numbers the engine reported
    depth: int | None = None


def sglang_log(lines: int = 6) -> str:
    """SGLang decode-batch log lines as SGLang (<= 0.5.10, `scheduler_metrics_mixin.py`) prints them."""
    return "\n".join(SGLANG_LINE.format(m=i // 6, s=(10 * i) % 60, t=512 + 40 * i, d=i % 10)
                     for i in range(lines)) + "\n"


def build_seed_case(name: str, out, scale: float = 1 / 64, seed: int = 0) -> SeedCase:
    """Write case `name` (see OBSERVED) under `out`; returns where its parts are."""
    if name not in OBSERVED:
        raise ValueError(f"no seed case {name!r}; known: {sorted(OBSERVED)}")
    out = Path(out)
    d, t = build(name, out, scale, seed=seed)
    if OBSERVED[name] == "sglang.log":
        (out / "sglang.log").write_text(sglang_log())
        return SeedCase(name, d, t, out / "sglang.log")
    tau, depth = OBSERVED[name]
    return SeedCase(name, d, t, None, tau, depth)
