"""Tree speculative decoding as EAGLE-2/3 and SGLang run it: dynamic draft tree, one tree verify.

Parameters are SGLang's: `num_steps` (= the chain's depth; draft forwards per cycle, the first one
being the extend over verified tokens), `topk` (branching) and `num_draft_tokens` (tree nodes
verified per cycle, root included; docs/metrics.md). EAGLE's `EaModel(total_token=T,
depth=D, top_k=K)` is num_draft_tokens T, num_steps D + 1, topk K here (its loop runs D forwards
after the root expansion; "total-token = drafted tokens + 1").

Drafting (SGLang `spec_utils.select_top_k_tokens` + `eagle_utils.organize_draft_results`; EAGLE
`cnets.py` `Model.topK_genrate`):
- step 0 takes the `topk` best tokens of the extend's last position: `topk` candidates at depth 1,
  scored by their draft log-probability;
- each later step runs one drafter forward over the `topk` frontier nodes (tree attention inside
  the drafter: prefix + ancestors + self), expands every node by its `topk` best children, scores
  each of the `topk²` candidates by cumulative log-probability and keeps the `topk` best as the
  next frontier (their parents' output states carried forward);
- of all `topk + (num_steps-1)·topk²` candidates the `num_draft_tokens - 1` best (plus the root =
  the last verified token) are verified, in candidate-index order (parents precede children).
EAGLE sums log-probs, SGLang multiplies probs: the same order up to rounding. Ties are broken by
the lower candidate index (stable sort), so a parent always ranks before its children.
Scores use the raw draft logits at every temperature (as both engines do), so the tree is a
deterministic function of the drafter.

Verification: one target forward over the nodes with a 4D tree mask (prefix + ancestors + self)
and position ids `n + depth`. Greedy: walk from the root, at each node accept the first child
whose token equals the target's argmax there (SGLang `verify_tree_greedy`). Sampling: at each
node try its children in order, accepting child x with probability r(x)/Σr where r starts as the
target's p and each rejected child's token is zeroed (EAGLE `evaluate_posterior`, SGLang
`tree_speculative_sampling_target_only` at thresholds 1.0: recursive rejection with point-mass
drafts, SpecInfer arXiv 2305.09781); if every child is rejected the token is drawn from the
normalised residual r, and after a leaf from p.

Commit: the target's HF cache keeps the prefix + root + accepted path (`hf_cache_keep`, a
compaction of non-contiguous positions); the drafter's cache is rolled back to the prefix and the
next extend rewrites the path with target features, as SGLang's draft-extend-after-verify does.
A chain-shaped tree (topk = 1) takes the chain loop's exact path: causal verify, no masks, a
contiguous keep (tests check token-for-token equality with `chain.generate`).

Works on any HF target whose attention takes a custom 4D float mask with explicit position ids
(`sdpa` or `eager`) and whose cache is full-attention `DynamicLayer`s; `check_tree_target` says
why when not. Knows nothing about tokenizers, checkpoints or metrics.
"""

from __future__ import annotations

import inspect
import time

import torch

from eagle_nb.loop.chain import (
    FEATURES_AUX,
    SpecStats,
    TargetRunner,
    VerifyStep,
    checked_ids,
    finish,
    softmax_probs,
)
from eagle_nb.loop.tree_accept import accept_tree_greedy, accept_tree_sample
from eagle_nb.loop.tree_shape import (
    TREE_ATTN,
    DraftTree,
    TreeUnsupported,
    resolve_num_draft_tokens,
    tree_mask_4d,
)
from eagle_nb.model.config import SpecConfig
from eagle_nb.model.drafter import FC_STRICT
from eagle_nb.model.kv_cache import hf_cache_keep
from eagle_nb.model.limits import check_fits, context_length


# -- drafting ------------------------------------------------------------------------------------
def _top(x: torch.Tensor, k: int):
    """The k largest of x (.., V) with ties to the lower index (like argmax), values and indices."""
    vals, idx = torch.sort(x, dim=-1, descending=True, stable=True)
    return vals[..., :k], idx[..., :k]


def _top_logp(logits: torch.Tensor, k: int):
    """The k best draft ids of each row of logits (.., Vd), ranked on the raw logits (k = 1 is
    exactly the chain's argmax; a full-vocabulary stable sort costs ~1 ms per call on CPU, so
    k > 1 uses topk, whose order among exactly equal logits is unspecified), with log-probs."""
    idx = logits.argmax(-1, keepdim=True) if k == 1 else torch.topk(logits, k, dim=-1).indices
    return logits.float().log_softmax(-1).gather(-1, idx), idx


@torch.no_grad()
def draft_tree(drafter, logits0: torch.Tensor, h0: torch.Tensor, cache, n: int, root: int,
               num_steps: int, topk: int, num_draft_tokens: int, d2t=None) -> DraftTree:
    """Grow and prune the draft tree. logits0 (Vd,), h0 (H,): the extend's last position, which
    predicts the token at position n + 1 (root at position n). Frontier nodes of step i are written
    to drafter cache slots n + (i-1)*topk .. at RoPE position n + i - 1. `d2t`: the draft->target
    table in use (None: the drafter's own; a fault may hand over another)."""
    dev = h0.device
    logp, d = _top_logp(logits0, topk)                                  # (topk,)
    cand_tok = [drafter.draft_to_target(d, d2t)]                           # per step: target ids
    cand_score, cand_parent = [logp], [torch.full((topk,), -1, device=dev)]
    front_idx = torch.arange(topk, device=dev)                          # candidate ids of frontier
    front_tok, front_score = cand_tok[0], logp
    front_h = h0[None].expand(topk, -1)                                 # (topk, H)
    anc = torch.zeros(topk, 0, dtype=torch.bool, device=dev)            # ancestors among tree slots
    base = topk
    for i in range(1, num_steps):
        slot = n + (i - 1) * topk
        kw = {}                             # a chain (topk 1): slot == position, plain causal
        if topk > 1:                        # tree attention: prefix + ancestors + self
            kw["positions"] = torch.full((topk,), n + i - 1, device=dev)
            kw["mask"] = torch.cat([torch.ones(topk, n, dtype=torch.bool, device=dev), anc,
                                    torch.eye(topk, dtype=torch.bool, device=dev)], 1)  # (topk, slot+topk)
        lg, h = drafter.step(front_tok[None], front_h[None], cache, slot, **kw)   # (1, topk, Vd)
        cache.advance(slot + topk)
        lp, d = _top_logp(lg[0], topk)                                   # (topk, topk)
        cu = front_score[:, None] + lp                                   # cumulative, (topk, topk)
        cand_tok.append(drafter.draft_to_target(d, d2t).flatten())
        cand_score.append(cu.flatten())
        cand_parent.append(front_idx.repeat_interleave(topk))
        front_score, sel = _top(cu.flatten(), topk)                      # next frontier
        rows = sel // topk
        front_idx, front_tok, front_h = base + sel, cand_tok[-1][sel], h[0, rows]
        anc = torch.cat([anc[rows], torch.eye(topk, dtype=torch.bool, device=dev)[rows]], 1)
        base += topk * topk
    scores = torch.cat(cand_score)
    toks, parents = torch.cat(cand_tok).tolist(), torch.cat(cand_parent).tolist()
    order = torch.sort(scores, descending=True, stable=True).indices[:num_draft_tokens - 1]
    keep = sorted(order.tolist())
    node_of = {c: j + 1 for j, c in enumerate(keep)}
    tree = DraftTree([root], [-1], [0], [0.0])
    for c in keep:
        p = 0 if parents[c] < 0 else node_of.get(parents[c])
        if p is None:
            raise AssertionError(f"candidate {c} kept without its parent {parents[c]}")
        tree.tokens.append(toks[c])
        tree.parents.append(p)
        tree.depths.append(tree.depths[p] + 1)
        tree.scores.append(float(scores[c]))
    return tree


# -- the target -------------------------------------------------------------------------------------
def check_tree_target(model) -> None:
    """Raise TreeUnsupported unless `model` takes a custom 4D mask with position ids."""
    attn = getattr(model.config, "_attn_implementation", None)
    name = type(model).__name__
    if attn not in TREE_ATTN:
        raise TreeUnsupported(f"{name}: attention implementation {attn!r} does not take a custom "
                              f"4D tree mask; load the target with attn_implementation='sdpa' or 'eager'")
    params = inspect.signature(model.forward).parameters
    missing = [k for k in ("attention_mask", "position_ids") if k not in params]
    if missing:
        raise TreeUnsupported(f"{name}.forward takes no {missing}: cannot verify a tree")
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    kinds = set(getattr(cfg, "layer_types", None) or ())
    if getattr(cfg, "sliding_window", None) and (not kinds or kinds - {"full_attention"}) \
            and getattr(cfg, "use_sliding_window", True):
        raise TreeUnsupported(f"{name}: sliding-window attention (sliding_window="
                              f"{cfg.sliding_window}); a custom 4D mask would replace the window and "
                              f"its cache layers cannot be compacted")


# -- the loop ---------------------------------------------------------------------------------------
@torch.no_grad()
def generate_tree(target, drafter, input_ids: torch.Tensor, num_steps: int = 4, topk: int = 1,
                  num_draft_tokens: int | None = None, max_new_tokens: int = 64,
                  temperature: float = 0.0, seed: int = 0, layer_ids=None,
                  feature_mode: str = FEATURES_AUX, layers_path=None, eos_token_id=None,
                  fc_policy: str = FC_STRICT, d2t: torch.Tensor | None = None):
    """Tree speculative decoding of one prompt (1, T0); target/feature arguments (features, fc
    policy, d2t: what the loop is given) are those of `chain.generate`, passed through.
    Returns (generated ids, SpecStats)."""
    SpecConfig(depth=num_steps, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)
    input_ids = checked_ids(target, input_ids)
    check_fits(input_ids.shape[1], max_new_tokens, num_steps, context_length(target))
    if feature_mode == FEATURES_AUX and not layer_ids:
        raise ValueError("layer_ids (HF convention) are required for feature_mode='aux'")
    N = resolve_num_draft_tokens(num_steps, topk, num_draft_tokens)
    if topk > 1:
        check_tree_target(target)
    t_start = time.perf_counter()
    dev, fdtype = drafter.fc.weight.device, drafter.fc.weight.dtype
    gen = torch.Generator(device=input_ids.device).manual_seed(seed)
    stats = SpecStats(num_steps, temperature, input_ids.shape[1], topk=topk, num_draft_tokens=N)
    greedy = temperature == 0
    dcache = drafter.new_cache(1, input_ids.shape[1] + max_new_tokens + num_steps * (topk + 1) + 2)
    mdtype = next(target.parameters()).dtype

    with TargetRunner(target, layer_ids, feature_mode, layers_path) as runner:
        logits, feats = runner.forward(input_ids, keep=1)                      # 1. prefill
        last = logits[0, -1]
        x_next = int(last.argmax()) if greedy else \
            int(torch.multinomial(softmax_probs(last, temperature), 1, generator=gen))
        stats.tokens.append(x_next)
        pend_ids = torch.cat([input_ids[:, 1:], torch.tensor([[x_next]], device=input_ids.device)], 1)
        pend_ids, pend_feats, dstart = pend_ids.to(dev), feats.to(dev, fdtype), 0
        stats.prefill_s = time.perf_counter() - t_start
        while len(stats.tokens) < max_new_tokens and x_next != eos_token_id:
            n = runner.length
            t0 = time.perf_counter()                                            # 2. draft
            dcache.rollback(dstart)
            lg, h = drafter.step(pend_ids, drafter.fuse(pend_feats, fc_policy), dcache, dstart)
            dcache.advance(dstart + pend_ids.shape[1])
            tree = draft_tree(drafter, lg[0, -1], h[0, -1], dcache, n, x_next, num_steps, topk, N, d2t)
            ids = torch.tensor([tree.tokens], device=input_ids.device)        # (1, N)
            t1 = time.perf_counter()                                            # 3. verify
            if tree.is_chain:
                tlogits, tfeats = runner.forward(ids)
            else:
                pos = torch.tensor([tree.depths], device=input_ids.device) + n
                tlogits, tfeats = runner.forward(
                    ids, attention_mask=tree_mask_4d(tree, n, mdtype, input_ids.device),
                    position_ids=pos)
            target_tokens = tlogits[0].argmax(-1)                               # (N,)
            if greedy:
                path = accept_tree_greedy(tree.tokens, tree.parents, target_tokens)
                bonus = int(target_tokens[path[-1] if path else 0])
            else:
                path, bonus = accept_tree_sample(tree.tokens, tree.parents,
                                                 softmax_probs(tlogits[0], temperature), gen)
            t2 = time.perf_counter()
            keep = [0, *path]                                                   # 4. commit
            hf_cache_keep(runner.cache, n, keep)
            accepted_ids = [tree.tokens[j] for j in path]
            stats.tokens.extend(accepted_ids + [bonus])
            stats.steps.append(VerifyStep(len(path), tree.tokens[1:], target_tokens.tolist(),
                                          t1 - t0, t2 - t1, parents=tree.parents[1:], path=path))
            x_next = bonus
            pend_ids = torch.tensor([accepted_ids + [bonus]], device=dev)
            pend_feats, dstart = tfeats[:, keep].to(dev, fdtype), n
            if eos_token_id is not None and eos_token_id in accepted_ids:
                break
    return finish(stats, eos_token_id, max_new_tokens, t_start)
