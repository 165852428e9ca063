"""A loaded target + drafter pair and the computing the CLI, notebooks and panels call:
`Pair.run(prompts, setting) -> RunResult` and `Pair.sweep(prompts, settings) -> Sweep`.

Greedy chain settings (T = 0, no reference check) are computed by one pass over every depth
(onepass_runs.py), chains at T > 0 in expectation by the sampled one pass; trees and reference
checks by the live loop. Each result says which
(`RunResult.computed_by`). A run turns the pair's healthy `faults.Wiring` into the setting's wiring (faults applied in
registry order, then its serving conditions, conditions/registry.py; costly objects are built once
per pair by `faults.Builds`) and hands its
fields to `loop.chain.generate` as explicit arguments. Results are cached per (prompts, setting),
so panels redraw without recomputing. Knows nothing about plotting or HTML.
"""
from __future__ import annotations

import time

import torch
from tqdm.auto import tqdm

from eagle_nb.conditions import registry as C
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.onepass_runs import OnePass
from eagle_nb.experiment.results import RunResult, Sweep
from eagle_nb.experiment.setting import Setting
from eagle_nb.io.paths import SHIPPED_PROMPTS, shipped, shipped_halves
from eagle_nb.io.prompts import check_prompts, raw_note
from eagle_nb.loop.chain import generate, greedy_reference
from eagle_nb.loop.metrics import from_stats
from eagle_nb.loop.tree import generate_tree
from eagle_nb.loop.verify_rules import DEFAULT_RULE
from eagle_nb.model.decoder import num_decoder_layers
from eagle_nb.model.layers import eagle3_layers
from eagle_nb.model.limits import encode, fit_prompt
from eagle_nb.model.targets import load_target


class Pair:
    """A target and a drafter, loaded once. `run()` results are cached per setting."""

    def __init__(self, target=None, drafter=None, *, device=None, dtype=None, device_map=None,
                 speculators_path=None, trust_remote_code: bool = False):
        from eagle_nb.checkpoints.load import load_drafter
        self.files, target, drafter, speculators_path = shipped_halves(target, drafter, speculators_path)
        self.target_path = str(target) if target else None
        self.target, self.tokenizer = load_target(target, device=device, dtype=dtype, device_map=device_map,
                                                  trust_remote_code=trust_remote_code)
        self.device = next(self.target.parameters()).device
        self.drafter_path = str(drafter)
        self.drafter = load_drafter(self.drafter_path, self.target,
                                    dtype=next(self.target.parameters()).dtype, device=self.device)
        self.speculators_path = speculators_path
        self.num_layers = num_decoder_layers(self.target)
        self.layer_ids = self.drafter.config.aux_layer_ids or list(eagle3_layers(self.num_layers))
        self.builds = F.Builds(self.target, self.drafter, self.speculators_path, self.num_layers,
                               self.tokenizer)
        self._cache: dict = {}
        # Greedy chains (T = 0, no reference check) come from one pass (onepass_runs.py); set
        # False to run them through the live loop too.
        self.use_one_pass = True
        # Chains at T > 0 take their metrics in expectation along one sampled trajectory per seed
        # (loop/onepass_sampled.py), no traces; set False to run them through the live loop.
        # Profiles (engine-style counted steps) always run the live loop (profile_run.py).
        self.sampled_one_pass = True
        self.one_pass = OnePass(self)

    temperatures = (0.0, 1.0)   # what the pair computes (the panels offer these)
    trees = True                # whether it computes trees (topk > 1)

    def describe(self) -> str:
        """One line: what the target and drafter are, where they run."""
        return (f"target {self.target_path or 'shipped'} ({self.num_layers} layers) on {self.device}; "
                f"drafter {self.drafter_path}; captured HF layer ids {list(self.layer_ids)}")

    def answers(self, fault: str) -> bool:
        """Whether this pair can compute `fault` (a loaded pair: every switchable fault; a recording
        answers fewer, recorded_pair.py)."""
        return True

    @property
    def eos_token_id(self):
        return self.tokenizer.eos_token_id

    @property
    def hidden_size(self) -> int:
        cfg = self.target.config
        return (cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg).hidden_size

    def decode(self, tokens) -> str:
        return self.tokenizer.decode(tokens)

    def prompts(self, n: int | None = None, path=None) -> list[str]:
        """The first `n` prompts of a JSON-lines file, or of this shipped pair's prompts (the default
        pair's for a pair of the user's)."""
        from eagle_nb.io.prompts import read_prompts
        if path is None and self.files is not None:
            path = shipped(self.files.prompts, "the shipped prompts")
        return (read_prompts(path)[:n] if n else read_prompts(path)) if path else shipped_prompts(n)

    @torch.no_grad()
    def aux_features(self, prompts):
        """Per prompt, the fused aux states (T, W) the target hands the drafter at the written ids."""
        from eagle_nb.model.capture import capture
        with capture(self.target, self.layer_ids) as states:
            for p in prompts:
                self.target(input_ids=self.encode(p))
                yield states.fused()[0]

    def wiring(self, setting: Setting = Setting()) -> F.Wiring:
        """What the loop is given under `setting`: the healthy wiring with its faults, then its
        serving conditions, applied."""
        w = F.apply(F.Wiring(self.target, self.drafter, tuple(self.layer_ids)), setting.faults,
                    self.builds)
        w = C.apply(w, setting.conditions, self.builds)
        if setting.layer_ids is not None:
            w = w.but(layer_ids=setting.layer_ids,
                      note=f"captured layers overridden: HF ids {list(setting.layer_ids)}")
        return w

    def encode(self, prompt, template: str | None = None) -> torch.Tensor:
        """(1, T) ids of a prompt as given (`limits.encode`), or rendered in a template mode."""
        if template is None:
            return encode(self.tokenizer, prompt).to(self.device)
        from eagle_nb.conditions.templates import encode_mode
        return encode_mode(self.tokenizer, prompt, template).to(self.device)

    def run(self, prompts, setting: Setting | None = None, *, check_reference: bool = False,
            progress: bool = True, truncate_prompt: bool = False, **fields) -> RunResult:
        """Speculate over `prompts` under `setting` (or `Setting(**fields)`, e.g. `depth=4,
        faults=("fc-bypass",)`). With `check_reference`, greedy runs are also decoded target-only
        and compared token for token. A prompt that does not fit the target's context is refused
        before decoding unless `truncate_prompt` (model/limits.py)."""
        if setting is None:
            setting = Setting(**fields)
        elif fields:
            raise TypeError(f"pass either a Setting or its fields, not both ({sorted(fields)})")
        prompts = tuple(check_prompts(prompts))
        how = (self.use_one_pass, self.sampled_one_pass)
        key = (prompts, setting, check_reference, truncate_prompt, how)
        checked = (prompts, setting, True, truncate_prompt, how)
        if not check_reference and checked in self._cache:
            return self._cache[checked]          # same run, with the reference check as well
        if key not in self._cache:
            res = self._run(prompts, setting, check_reference, progress, truncate_prompt)
            note = raw_note(prompts, self.tokenizer)
            if note and note not in res.notes:
                res.notes.append(note)
            self._cache[key] = res
        return self._cache[key]

    def _run(self, prompts, s: Setting, check_reference: bool, progress: bool,
             truncate_prompt: bool = False) -> RunResult:
        if self.use_one_pass and self.one_pass.applies(s, check_reference):
            return self.one_pass.run(prompts, s, truncate_prompt)
        w = self.wiring(s)
        eos = self.eos_token_id
        stats, outputs, match, ref_s = [], [], [], 0.0
        for i, p in enumerate(tqdm(prompts, desc=f"speculate k={s.depth} T={s.temperature} {s.label}",
                                   disable=not progress, leave=False)):
            ids = fit_prompt(self.encode(w.served(p), w.template), self.target,
                             s.max_new_tokens, s.depth, truncate=truncate_prompt, where=f"prompt {i}")
            kw = dict(max_new_tokens=s.max_new_tokens, temperature=s.temperature, seed=s.seed + i,
                      layer_ids=list(w.layer_ids), feature_mode=w.features, fc_policy=w.fc_policy,
                      d2t=w.d2t, eos_token_id=eos)
            if s.is_tree:      # SGLang/EAGLE dynamic tree (tree.py); depth = num_steps
                toks, st = generate_tree(w.target, w.drafter, ids, s.depth, s.topk,
                                         s.num_draft_tokens, **kw)
            else:
                toks, st = generate(w.target, w.drafter, ids, depth=s.depth,
                                    verify_rule=s.verify_rule or DEFAULT_RULE, **kw)
            stats.append(st)
            outputs.append(self.tokenizer.decode(toks))
            if check_reference and s.temperature == 0:
                ref_target = w.target if s.conditions else self.target   # a condition's target
                ref, t = self._greedy(ref_target, ids, s.max_new_tokens, eos)
                match.append(ref == toks)
                ref_s += t
        wiring = {**w.describe(), "target": self.target_path or "shipped", "drafter": self.drafter_path}
        return RunResult(s, list(prompts), outputs, stats, from_stats(stats), wiring,
                         match if match else None, ref_s or None, list(w.notes))

    def _greedy(self, target, ids, max_new_tokens: int, eos):
        """Target-only greedy decoding of `ids` and its seconds, once per target and prompt: every
        fault's reference check decodes the same target (a condition's target is another)."""
        key = ("greedy", id(target), tuple(ids.reshape(-1).tolist()), max_new_tokens, eos)
        if key not in self._cache:
            self._cache[key] = greedy_reference(target, ids, max_new_tokens, eos_token_id=eos)
        return self._cache[key]

    def sweep(self, prompts, settings, *, progress: bool = True) -> Sweep:
        """Run every setting once (cached) over the same prompts."""
        settings = list(settings)
        return Sweep(self.run(prompts, s, progress=False)
                     for s in tqdm(settings, desc="settings", disable=not progress))


def shipped_prompts(n: int | None = None) -> list[str]:
    from eagle_nb.io.prompts import read_prompts
    p = read_prompts(shipped(SHIPPED_PROMPTS, "the shipped prompts"))
    return p[:n] if n else p


def run_prompts(target=None, drafter=None, prompts=None, device=None, check_reference=False,
                **fields) -> RunResult:
    pair = Pair(target, drafter, device=device)
    t0 = time.perf_counter()
    res = pair.run(prompts or shipped_prompts(), check_reference=check_reference, **fields)
    res.notes.append(f"wall time {time.perf_counter() - t0:.1f}s")
    return res
