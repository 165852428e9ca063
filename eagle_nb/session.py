"""A loaded target + drafter pair and runs over prompt sets: the layer the CLI, notebooks and
widgets call. Results are plain data (`RunResult`) and are cached per setting, so widgets redraw
without recomputing. Knows nothing about plotting.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from . import ablations as abl
from .capture import eagle3_layers, num_decoder_layers
from .metrics import AcceptanceMetrics, from_stats, sglang_log_line, vllm_log_line
from .speculate import generate, greedy_reference
from .tree import generate_tree, resolve_num_draft_tokens
from .targets import SHIPPED_DRAFTER, SHIPPED_DRAFTER_SPECULATORS, SHIPPED_PROMPTS, load_target


@dataclass
class RunResult:
    setting: dict
    prompts: list[str]
    outputs: list[str]
    stats: list                     # SpecStats per prompt
    metrics: AcceptanceMetrics
    reference_match: list[bool] | None = None
    reference_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def new_tokens(self) -> int:
        return sum(len(s.tokens) for s in self.stats)

    @property
    def spec_s(self) -> float:
        return sum(s.total_s for s in self.stats)

    def summary(self) -> dict:
        m = self.metrics
        return {
            "setting": self.setting, "outputs": self.outputs, "accept_length": m.accept_length,
            "per_position_acceptance": m.per_position_acceptance,
            "draft_acceptance_rate": m.draft_acceptance_rate,
            "conditional_alpha": m.conditional_alpha, "accept_histogram": m.accept_histogram,
            "accept_counts": m.accept_counts, "mean_accepted": m.mean_accepted,
            "sglang_accept_len": m.sglang_accept_len,
            "sglang_accept_rate_by_draft_tokens": m.sglang_accept_rate_by_draft_tokens,
            "sglang_accept_rate_by_drafts": m.sglang_accept_rate_by_drafts,
            "sglang_log_line": sglang_log_line(m), "vllm_log_line": vllm_log_line(m),
            "verify_steps": m.verify_steps, "new_tokens": self.new_tokens,
            "matches_target_greedy": None if self.reference_match is None else all(self.reference_match),
            "tokens_per_s": self.new_tokens / self.spec_s if self.spec_s else None,
            "reference_tokens_per_s": (self.new_tokens / self.reference_s) if self.reference_s else None,
            "notes": self.notes,
        }

    def report_text(self) -> str:
        s = self.summary()
        lines = [f"setting: {self.setting}", *[f"note: {n}" for n in self.notes],
                 f"accept length (tau): {s['accept_length']:.3f} over {s['verify_steps']} verify steps",
                 f"SGLang (accept_len/num_draft_tokens): {s['sglang_log_line']}",
                 f"SGLang (accepted/proposed): accept rate {s['sglang_accept_rate_by_drafts']:.3f}",
                 f"vLLM: {s['vllm_log_line']}",
                 "conditional n-alpha: " + ", ".join("-" if a is None else f"{a:.3f}"
                                                     for a in s["conditional_alpha"]),
                 "accepted-count histogram: " + ", ".join(f"{h:.3f}" for h in s["accept_histogram"]),
                 f"matches target greedy: {s['matches_target_greedy']}",
                 f"tokens/s: {s['tokens_per_s']:.1f}"]
        return "\n".join(lines)


class Pair:
    """A target and a drafter, loaded once. `run()` results are cached per setting."""

    def __init__(self, target=None, drafter=None, *, device=None, dtype=None, device_map=None,
                 speculators_path=None):
        from .checkpoints import load_drafter
        self.target_path = str(target) if target else None
        self.target, self.tokenizer = load_target(target, device=device, dtype=dtype, device_map=device_map)
        self.device = next(self.target.parameters()).device
        self.drafter_path = str(drafter or SHIPPED_DRAFTER)
        self.drafter = load_drafter(self.drafter_path, self.target,
                                    dtype=next(self.target.parameters()).dtype, device=self.device)
        self.speculators_path = speculators_path or (SHIPPED_DRAFTER_SPECULATORS if drafter is None else None)
        self.num_layers = num_decoder_layers(self.target)
        self.layer_ids = self.drafter.config.aux_layer_ids or list(eagle3_layers(self.num_layers))
        self._cache: dict = {}

    def setup(self, ablations=()) -> abl.Setup:
        base = abl.Setup(self.target, self.drafter, list(self.layer_ids))
        return abl.apply(base, ablations, speculators_path=self.speculators_path)

    def encode(self, prompt: str) -> torch.Tensor:
        return self.tokenizer(prompt, return_tensors="pt")["input_ids"].to(self.device)

    def run(self, prompts, depth: int = 4, max_new_tokens: int = 64, temperature: float = 0.0,
            seed: int = 0, ablations=(), check_reference: bool = False, progress: bool = True,
            layer_ids=None, topk: int = 1, num_draft_tokens: int | None = None) -> RunResult:
        """Speculate over `prompts`. `layer_ids` (HF convention) overrides the captured layers,
        e.g. to try another convention's ids against this drafter. topk > 1 drafts SGLang/EAGLE
        trees (tree.py; depth = num_steps); topk = 1 is the chain loop."""
        key = (tuple(prompts), depth, max_new_tokens, temperature, seed, tuple(ablations),
               check_reference, tuple(layer_ids) if layer_ids is not None else None,
               topk, num_draft_tokens)
        if key in self._cache:
            return self._cache[key]
        s = self.setup(ablations)
        if layer_ids is not None:
            s.layer_ids = sorted(int(i) for i in layer_ids)
            s.notes.append(f"captured layers overridden: HF ids {s.layer_ids}")
        eos = self.tokenizer.eos_token_id
        stats, outputs, match, ref_s = [], [], [], 0.0
        for i, p in enumerate(tqdm(prompts, desc=f"speculate k={depth} T={temperature} {list(ablations)}",
                                   disable=not progress, leave=False)):
            ids = self.encode(p)
            kw = dict(max_new_tokens=max_new_tokens, temperature=temperature, seed=seed + i,
                      layer_ids=s.layer_ids, feature_mode=s.feature_mode, eos_token_id=eos)
            if topk == 1:
                toks, st = generate(s.target, s.drafter, ids, depth=depth, **kw)
            else:
                toks, st = generate_tree(s.target, s.drafter, ids, depth, topk, num_draft_tokens, **kw)
            stats.append(st)
            outputs.append(self.tokenizer.decode(toks))
            if check_reference and temperature == 0:
                ref, t = greedy_reference(self.target, ids, max_new_tokens, eos_token_id=eos)
                match.append(ref == toks)
                ref_s += t
        setting = {"depth": depth, "topk": topk,
                   "num_draft_tokens": resolve_num_draft_tokens(depth, topk, num_draft_tokens),
                   "max_new_tokens": max_new_tokens, "temperature": temperature,
                   "seed": seed, "ablations": list(ablations), "layer_ids_hf": s.layer_ids,
                   "feature_mode": s.feature_mode, "fc_policy": s.drafter.fc_policy,
                   "target": self.target_path or "shipped", "drafter": self.drafter_path}
        result = RunResult(setting, list(prompts), outputs, stats, from_stats(stats),
                           match if match else None, ref_s or None, s.notes)
        self._cache[key] = result
        return result


def shipped_prompts(n: int | None = None) -> list[str]:
    from .corpus import read_prompts
    p = read_prompts(SHIPPED_PROMPTS)
    return p[:n] if n else p


def run_prompts(target=None, drafter=None, prompts=None, device=None, **kw) -> RunResult:
    pair = Pair(target, drafter, device=device)
    t0 = time.perf_counter()
    res = pair.run(prompts or shipped_prompts(), **kw)
    res.notes.append(f"wall time {time.perf_counter() - t0:.1f}s")
    return res

