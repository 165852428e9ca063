"""Chain speculative decoding with an EAGLE-3 drafter: draft -> verify -> accept, with KV caches.

Implements greedy verification and, at T > 0, the three verify rules of verify_rules.py (argmax
drafts with one-hot rejection, sampled drafts with Leviathan/Chen rejection sampling, arXiv
2211.17192 and 2302.01318, and strict matching) for EAGLE-3 chain drafts (arXiv 2503.01840). Pairing as in the engines: drafter
position t consumes the embedding of token t+1 with the target state of token t and predicts
token t+2 (docs/drafter.md). Every cycle: one drafter extend over the newly verified
tokens (target features through `fc`), k-1 drafter steps on its own states, one target forward
over k+1 tokens, then both caches are rolled back by position to what was committed.

Knows nothing about tokenizers, checkpoint formats, faults or metrics; it receives a stock HF
causal LM (seen through capture hooks), an `Eagle3Drafter` and, as explicit arguments, what the
loop is given: which features the target hands over, the fc policy and the d2t table in use (the
healthy defaults: aux layers, strict fc, the drafter's own d2t). Returns tokens plus `SpecStats`.
`greedy_reference` is the slow path every result is tested against.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field

import torch

from eagle_nb.model.capture import capture
from eagle_nb.model.config import (FC_STRICT, FEATURE_MODES, FEATURES_AUX, FEATURES_FINAL,
                                   FEATURES_NONE, SpecConfig)
from eagle_nb.model.kv_cache import hf_cache_len, hf_cache_rollback
from eagle_nb.loop import verify_rules as VR
from eagle_nb.loop.verify_rules import accept_greedy
from eagle_nb.model.limits import as_input_ids, check_fits, context_length, text_config


@dataclass
class VerifyStep:
    accepted: int                 # drafts accepted in this cycle (0..k)
    draft_tokens: list[int]       # the k drafted target-vocab ids
    target_tokens: list[int]      # the target's k+1 tokens at the same positions
    draft_s: float = 0.0
    verify_s: float = 0.0
    parents: list[int] | None = None   # tree (tree.py): parent node of each draft (0 = root)
    path: list[int] | None = None      # tree: accepted node ids (draft i is node i + 1)

    @property
    def accepted_tokens(self) -> list[int]:
        if self.path is None:
            return self.draft_tokens[:self.accepted]
        return [self.draft_tokens[j - 1] for j in self.path]


@dataclass
class SpecStats:
    depth: int
    temperature: float
    prompt_len: int
    tokens: list[int] = field(default_factory=list)       # generated ids (prompt excluded)
    steps: list[VerifyStep] = field(default_factory=list)
    prefill_s: float = 0.0
    total_s: float = 0.0
    topk: int = 1                         # tree.py: branching factor (1 = chain)
    num_draft_tokens: int | None = None   # nodes verified per step, root included (chain: depth+1)

    @property
    def accept_counts(self) -> list[int]:
        return [s.accepted for s in self.steps]


# -- the target, seen through hooks ----------------------------------------------------------------
class TargetRunner:
    """Runs the HF target with its own cache and hands back (logits, features) per forward."""

    def __init__(self, model, layer_ids, feature_mode: str = FEATURES_AUX, layers_path=None):
        if feature_mode not in FEATURE_MODES:
            raise ValueError(f"unknown feature_mode {feature_mode!r}; known: {FEATURE_MODES}")
        self.model, self.layer_ids, self.mode, self.layers_path = model, layer_ids, feature_mode, layers_path
        params = inspect.signature(model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        self.keep_kw = "logits_to_keep" in params
        self.cache = None
        self._ctx = None

    def __enter__(self):
        from transformers import DynamicCache
        self.cache = DynamicCache(config=self.model.config) if "config" in \
            inspect.signature(DynamicCache.__init__).parameters else DynamicCache()
        if self.mode == FEATURES_AUX:
            self._ctx = capture(self.model, self.layer_ids, layers_path=self.layers_path)
            self.states = self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        self._ctx = None

    @property
    def length(self) -> int:
        return hf_cache_len(self.cache)

    def rollback(self, to_len: int) -> None:
        hf_cache_rollback(self.cache, to_len)

    @torch.no_grad()
    def forward(self, ids: torch.Tensor, keep: int | None = None, **extra):
        kw = {self.cache_kw: self.cache, "use_cache": True, **extra}   # extra: tree mask, positions
        if keep is not None and self.keep_kw:
            kw["logits_to_keep"] = keep
        if self.mode == FEATURES_NONE:             # target-only decoding: no features
            return self.model(input_ids=ids, **kw).logits, None
        if self.mode == FEATURES_FINAL:
            out = self.model(input_ids=ids, output_hidden_states=True, **kw)
            feats = out.hidden_states[-1]          # post-norm final state, Ht wide
        else:
            out = self.model(input_ids=ids, **kw)
            feats = self.states.fused()            # (B, T, n_aux*Ht), ascending layer order
        return out.logits, feats


# -- probabilities (the acceptance rules are pure functions in verify_rules.py) ----------------------
def softmax_probs(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    return (logits.float() / temperature).softmax(-1)


# -- the loop --------------------------------------------------------------------------------------
def checked_ids(target, input_ids) -> torch.Tensor:
    ids = as_input_ids(input_ids, getattr(text_config(target), "vocab_size", None))
    return ids.to(next(target.parameters()).device)


@torch.no_grad()
def generate(target, drafter, input_ids: torch.Tensor, depth: int = 4, max_new_tokens: int = 64,
             temperature: float = 0.0, seed: int = 0, layer_ids=None,
             feature_mode: str = FEATURES_AUX, layers_path=None, eos_token_id=None,
             fc_policy: str = FC_STRICT, d2t: torch.Tensor | None = None,
             verify_rule: str = VR.DEFAULT_RULE):
    """Speculative decoding of one prompt (1, T0). Returns (generated ids, SpecStats).
    `feature_mode`, `fc_policy`, `d2t`: what the loop is given (faults.Wiring fills them).
    `verify_rule` (T > 0 only; verify_rules.py): argmax | sampled | strict. At T = 0 every rule is
    greedy verification, so the output is the target's greedy output under each.
    Parameters are checked by SpecConfig, and prompt + max_new_tokens + depth must fit the
    target's context (model/limits.py) before anything decodes."""
    SpecConfig(depth=depth, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    VR.check_rule(verify_rule)
    input_ids = checked_ids(target, input_ids)
    check_fits(input_ids.shape[1], max_new_tokens, depth, context_length(target))
    if feature_mode not in (FEATURES_AUX, FEATURES_FINAL):
        raise ValueError(f"generate() needs target features: feature_mode {feature_mode!r} "
                         f"is not one of {(FEATURES_AUX, FEATURES_FINAL)}")
    if feature_mode == FEATURES_AUX and not layer_ids:
        raise ValueError("layer_ids (HF convention) are required for feature_mode='aux'")
    t_start = time.perf_counter()
    dev = drafter.fc.weight.device
    gen = torch.Generator(device=input_ids.device).manual_seed(seed)
    stats = SpecStats(depth, temperature, input_ids.shape[1])
    greedy = temperature == 0
    dcache = drafter.new_cache(1, input_ids.shape[1] + max_new_tokens + 2 * depth + 2)
    fdtype = drafter.fc.weight.dtype

    def pick(logits, argmax=False):  # logits (1, V) -> (token, probs or None)
        if greedy or argmax:
            return logits.argmax(-1), None
        probs = softmax_probs(logits, temperature)
        return torch.multinomial(probs, 1, generator=gen)[:, 0], probs

    with TargetRunner(target, layer_ids, feature_mode, layers_path) as runner:
        # 1. prefill the target; its first token is not speculative
        logits, feats = runner.forward(input_ids, keep=1)
        x_next, _ = pick(logits[:, -1])
        stats.tokens.append(int(x_next))
        pend_ids = torch.cat([input_ids[:, 1:], x_next[:, None]], 1).to(dev)
        pend_feats, dstart = feats.to(dev, fdtype), 0
        stats.prefill_s = time.perf_counter() - t_start
        while len(stats.tokens) < max_new_tokens and int(x_next) != eos_token_id:
            n = runner.length                                   # committed target positions
            # 2. draft: extend over verified tokens with target features, then k-1 own steps
            t0 = time.perf_counter()
            dcache.rollback(dstart)
            lg, h = drafter.step(pend_ids, drafter.fuse(pend_feats, fc_policy), dcache, dstart)
            dcache.advance(dstart + pend_ids.shape[1])
            drafts, qs = [], []
            for i in range(depth):
                d, q = pick(lg[:, -1], VR.drafts_argmax(verify_rule))   # draft-vocab id
                tid = drafter.draft_to_target(d, d2t)
                drafts.append(tid)
                if q is not None and VR.needs_draft_probs(verify_rule):
                    qs.append(drafter.target_logits(q.log(), d2t)[0].exp())
                if i < depth - 1:
                    pos = dcache.pos
                    lg, h = drafter.step(tid[:, None], h[:, -1:], dcache, pos)
                    dcache.advance(pos + 1)
            draft_ids = torch.stack(drafts, 1).to(input_ids.device)        # (1, k)
            t1 = time.perf_counter()
            # 3. verify all k drafts in one target forward over k+1 tokens
            tlogits, tfeats = runner.forward(torch.cat([x_next[:, None], draft_ids], 1))
            if greedy:
                target_tokens = tlogits[0].argmax(-1)                      # (k+1,)
                a = accept_greedy(draft_ids[0], target_tokens)
                bonus = int(target_tokens[a])
            else:
                p = softmax_probs(tlogits[0], temperature)
                q_all = torch.stack(qs).to(p.device) if qs else None      # (k, V) or None
                a, bonus = VR.accept(verify_rule, draft_ids[0], q_all, p, gen)
                target_tokens = tlogits[0].argmax(-1)
            t2 = time.perf_counter()
            # 4. commit x_next + a drafts in the target cache; the bonus is the next input
            runner.rollback(n + 1 + a)
            accepted_ids = draft_ids[0, :a].tolist()
            stats.tokens.extend(accepted_ids + [bonus])
            stats.steps.append(VerifyStep(a, draft_ids[0].tolist(), target_tokens.tolist(),
                                          t1 - t0, t2 - t1))
            x_next = torch.tensor([bonus], device=input_ids.device)
            pend_ids = torch.tensor([accepted_ids + [bonus]], device=dev)
            pend_feats, dstart = tfeats[:, :a + 1].to(dev, fdtype), n
            if eos_token_id is not None and eos_token_id in accepted_ids:
                break
    return finish(stats, eos_token_id, max_new_tokens, t_start)


def finish(stats: SpecStats, eos_token_id, max_new_tokens: int, t_start: float):
    """Cut the generated ids after EOS and at max_new_tokens (a cycle may overshoot both); stamp
    the total time. Returns (generated ids, stats). Shared by the chain and tree loops."""
    tokens = stats.tokens
    if eos_token_id is not None and eos_token_id in tokens:
        tokens = tokens[:tokens.index(eos_token_id) + 1]
    stats.tokens = tokens[:max_new_tokens]
    stats.total_s = time.perf_counter() - t_start
    return stats.tokens, stats


@torch.no_grad()
def greedy_reference(target, input_ids: torch.Tensor, max_new_tokens: int = 64, eos_token_id=None):
    """Target-only greedy decoding, one token per forward, with the same HF cache. Returns
    (generated ids, seconds)."""
    SpecConfig(max_new_tokens=max_new_tokens)
    input_ids = checked_ids(target, input_ids)
    check_fits(input_ids.shape[1], max_new_tokens, 0, context_length(target))
    t0 = time.perf_counter()
    runner = TargetRunner(target, None, feature_mode=FEATURES_NONE)
    out = []
    with runner:
        ids = input_ids
        while len(out) < max_new_tokens:
            logits, _ = runner.forward(ids, keep=1)
            nxt = int(logits[0, -1].argmax())
            out.append(nxt)
            if nxt == eos_token_id:
                break
            ids = torch.tensor([[nxt]], device=input_ids.device)
    return out, time.perf_counter() - t0
