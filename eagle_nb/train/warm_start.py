"""Starting a drafter from a trained one: its lm_head rows moved to a rebuilt draft vocabulary,
and a norm before `fc` added to a drafter trained without it, at the same function for a typical
token: `fc_norm` (one RMSNorm per captured layer, EAGLE 3.1; vllm-project/speculators PR #610;
vLLM 0.32 reads it, llama.cpp 0.3.36 does not) or `norm_before_fc` (one RMSNorm over the three
layers together; both read it: vLLM's llama_eagle3.py, llama.cpp's src/models/eagle3.cpp).

Both keep every trained weight and change only what the new shape needs, so a warm-started run
starts where the old drafter was (its held-out accuracy before the first step is the old one's).
"""
from __future__ import annotations

import torch

from eagle_nb.train.drafter_chat import ChatDrafterConfig, new_drafter

REPLACED = ("lm_head", "d2t", "t2d", "embed_tokens")      # rebuilt from the target, not loaded
ADDED = ("fc_norm", "input_norm")                           # may be new in the warm-started drafter


def warm_vocab_rows(old_rows, old_t2d, fresh_rows, new_t2d, new_row_scale: float = 1.0) -> torch.Tensor:
    """fresh_rows (Vd_new, H) with each row of `old_rows` (Vd_old, H) moved to the new draft id of
    the same target id (draft ids are the selected target ids in ascending order); the rows of ids
    the old vocabulary lacked are the fresh rows times `new_row_scale` (0: they start at logit 0,
    below a trained row's confident top logit, instead of outscoring it)."""
    old_ids = old_t2d.nonzero().flatten()                          # draft id -> target id, old
    new_pos = torch.full((new_t2d.numel(),), -1, dtype=torch.long)
    new_pos[new_t2d.nonzero().flatten()] = torch.arange(int(new_t2d.sum()))
    keep = new_pos[old_ids] >= 0
    out = fresh_rows.detach().clone() * new_row_scale
    out[new_pos[old_ids[keep]]] = old_rows[keep].to(out.dtype)
    return out


def chunk_rms(seqs: list[dict], n_aux: int, width: int, limit: int = 64) -> torch.Tensor:
    """(n_aux,) the median over tokens of each captured layer's root mean square, from the first
    `limit` sequences' features (B, T, n_aux*width)."""
    feats = torch.cat([q["feats"].float().reshape(-1, n_aux, width) for q in seqs[:limit]])
    return feats.pow(2).mean(-1).sqrt().median(0).values


def fold_fc_norm(fc_weight: torch.Tensor, rms: torch.Tensor) -> torch.Tensor:
    """fc's weight (H, n_aux*Ht) for inputs normalised per layer chunk: column block i times rms[i],
    so that fc(norm(x)) = fc_old(x) for a token whose chunk i has root mean square rms[i] (the
    norms' weights at one), while a token with massive activations no longer swamps fc."""
    n_aux = rms.numel()
    return (fc_weight.reshape(fc_weight.shape[0], n_aux, -1) * rms.view(1, n_aux, 1).to(fc_weight.dtype)
            ).reshape_as(fc_weight)


def widen_mlp(state: dict, fresh_state: dict) -> dict:
    """`state`'s MLP weights padded to the fresh (wider) MLP's shape: the new neurons' gate and up
    rows are the fresh initialisation, their down_proj columns zero, so the wider MLP computes
    exactly what the narrow one did until training moves them."""
    out = dict(state)
    for k, v in state.items():
        want = fresh_state.get(k)
        if want is None or want.shape == v.shape or ".mlp." not in k:
            continue
        if k.endswith("down_proj.weight"):
            pad = torch.zeros(v.shape[0], want.shape[1] - v.shape[1], dtype=v.dtype)
            out[k] = torch.cat([v, pad], dim=1)
        else:                                               # gate_proj / up_proj rows
            out[k] = torch.cat([v, want[v.shape[0]:].to(v.dtype)], dim=0)
    return out


def warm_drafter(warm_start: str, target, d2t, t2d, new_row_scale: float = 1.0, fc_norm: bool = False,
                 seqs: list[dict] | None = None, norm_before_fc: bool = False, intermediate_size: int = 1536):
    """A drafter for the draft vocabulary (d2t, t2d): the warm start's weights, its lm_head rows
    moved to the new draft ids of the same target ids, the target's rows (times `new_row_scale`)
    for ids it did not have. With `fc_norm` (`norm_before_fc`) on a warm start without it, fc is
    folded with the median per-layer (whole) scale of `seqs`' features; a warm start that has
    one needs it asked for again. A wider `intermediate_size` pads the MLP (`widen_mlp`)."""
    from eagle_nb.checkpoints.load import load_drafter
    cc = ChatDrafterConfig(draft_vocab_size=int(t2d.sum()), intermediate_size=intermediate_size)
    fresh = new_drafter(target, d2t, t2d, cc, fc_norm=fc_norm, norm_before_fc=norm_before_fc)
    if not warm_start:
        return fresh
    old = load_drafter(warm_start, target, dtype=torch.float32)
    for name, want in (("fc_norm", fc_norm), ("norm_before_fc", norm_before_fc)):
        if getattr(old.config, name) and not want:
            raise ValueError(f"warm start {warm_start} has {name}: train it with --{name.replace('_', '-')}")
    if fc_norm and norm_before_fc:
        raise ValueError("--fc-norm and --norm-before-fc: choose one norm before fc")
    if old.config.intermediate_size > intermediate_size:
        raise ValueError(f"warm start {warm_start}: its MLP is {old.config.intermediate_size} wide, "
                         f"--intermediate-size {intermediate_size} would cut it")
    state = widen_mlp({k: v for k, v in old.state_dict().items() if not k.startswith(REPLACED)},
                      fresh.state_dict())
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    added = (fc_norm and not old.config.fc_norm) or (norm_before_fc and not old.config.norm_before_fc)
    allowed = REPLACED + (ADDED if added else ())
    if unexpected or any(not k.startswith(allowed) for k in missing):
        raise ValueError(f"warm start {warm_start}: keys differ (missing {missing}, unexpected {unexpected})")
    with torch.no_grad():
        fresh.lm_head.weight.copy_(warm_vocab_rows(old.lm_head.weight.float(), old.t2d,
                                                   fresh.lm_head.weight, t2d, new_row_scale))
        if added:
            if not seqs:
                raise ValueError("a norm before fc on a warm start without it needs the training features")
            n_aux = fresh.config.num_aux if fc_norm else 1
            rms = chunk_rms(seqs, n_aux, fresh.config.fc_in_features // n_aux)
            print(f"{'fc_norm' if fc_norm else 'norm_before_fc'} added: fc folded with the features' "
                  f"median RMS {[round(x, 3) for x in rms.tolist()]}")
            fresh.fc.weight.copy_(fold_fc_norm(old.fc.weight.float(), rms))
    return fresh
