"""The doctor's static checks of the drafter against its target: which layers each engine would
capture for the aux ids as written (docs/layers.md), the drafter's embedding and RoPE against the
target's, whether engine-style capture finds the target's decoder, and the vocabulary. Each
returns a `diagnosis.Check` naming the registry faults it is evidence for; the target is read
through `target_meta` (lazily, never loaded). Knows nothing about speculation.
"""
from __future__ import annotations

from eagle_nb.checkpoints.stats import EMBED, embedding_agreement
from eagle_nb.doctor.checks_drafter import ck
from eagle_nb.doctor.diagnosis import Check
from eagle_nb.doctor.target_layout import layout_check
from eagle_nb.engines.registry import captures
from eagle_nb.model.fault_names import (EMBED_RANDOM, EMBED_TARGET_FORCED, FC_WIDTH_MISMATCH,
                                        LAYER_IDS_HEURISTIC, LAYER_IDS_MINUS_1, LAYER_IDS_PLUS_1,
                                        ROPE_THETA_WRONG, VOCAB_MISMATCH)
from eagle_nb.model.layers import eagle3_layers, from_hf


def engine_captures(rep, raw_cfg, L: int) -> dict:
    """HF ids each engine would capture for this config (its registry entry's `captures`), and the
    ids the drafter was trained on."""
    default = list(eagle3_layers(L))
    return {"trained (kit reading)": rep.config.aux_layer_ids or default,
            **captures(raw_cfg, default)}


def check_aux_ids(rep, raw_cfg, tmeta) -> Check:
    cfg = rep.config
    written = cfg.extra.get("sglang_config_ids") or raw_cfg.get("eagle_aux_hidden_state_layer_ids")
    if tmeta is None or tmeta.num_layers is None:
        return ck("aux-ids", "skip", "aux layer ids vs target",
                   f"ids as written {written}, HF {cfg.aux_layer_ids}; pass --target to check them")
    L = tmeta.num_layers
    caps = engine_captures(rep, raw_cfg, L)
    trained = caps["trained (kit reading)"]
    conv = ("HF / vLLM (input of layer k)" if rep.format != "sglang" else "output of layer k (+1 = HF)")
    ev = (f"L = {L}; as written {written if written is not None else 'none (EAGLE default implied)'} "
          f"[{conv}] -> HF {trained}; to write them for vLLM (top-level) {from_hf(trained, 'vllm')}, "
          f"for SGLang (nested eagle_config) {from_hf(trained, 'sglang-config')}; "
          + "; ".join(f"{k} captures {v}" for k, v in caps.items() if k != "trained (kit reading)"))
    bad = [i for i in trained if not 0 <= i <= L]
    if bad:
        return ck("aux-ids", "fail", "aux layer ids vs target", ev + f"; ids {bad} outside 0..{L}",
                   [FC_WIDTH_MISMATCH], f"use ids within 0..{L} (HF convention)")
    notes, faults = [], []
    if L in trained:
        notes.append(f"id {L} is the final boundary: it must be captured pre-norm (HF's "
                     f"hidden_states[{L}] is post-norm); SGLang's before-layer capture cannot reach "
                     "it and vLLM only after PR #36063, so fc gets N-1 states and fails (docs/faults.md)")
        faults += [FC_WIDTH_MISMATCH]
    if 0 in trained:
        notes.append("id 0 (embeddings) is not capturable by SGLang (residual is None before layer 0)")
    for eng, ids in caps.items():
        if eng == "trained (kit reading)" or ids == trained:
            continue
        d = [a - b for a, b in zip(ids, trained)]
        if len(set(d)) == 1 and d[0] in (1, -1):
            faults.append(LAYER_IDS_PLUS_1 if d[0] == 1 else LAYER_IDS_MINUS_1)
            notes.append(f"{eng} would capture {ids}, one boundary {'later' if d[0] == 1 else 'earlier'}")
        else:
            faults.append(LAYER_IDS_HEURISTIC)
            notes.append(f"{eng} would capture {ids} instead of {trained}")
    if notes:
        return ck("aux-ids", "warn", "aux layer ids vs target", ev + "; " + "; ".join(notes),
                   list(dict.fromkeys(faults)),
                   "write the ids in the convention the serving engine reads: top-level "
                   "`eagle_aux_hidden_state_layer_ids` (HF ids) for vLLM, nested "
                   "`eagle_config` (output-of-layer ids) for SGLang (docs/layers.md)")
    return ck("aux-ids", "pass", "aux layer ids vs target", ev + "; every engine captures the trained ids")


def check_embed(rep, state, tmeta) -> Check:
    cfg = rep.config
    emb = state.get("embed_tokens.weight")
    if emb is None:
        ev = "absent: engines take the target's"
        if tmeta is not None and tmeta.get("vocab_size") not in (None, cfg.vocab_size):
            return ck("embed-tokens", "fail", "embed_tokens", ev + f", but target vocab "
                       f"{tmeta.get('vocab_size')} != drafter vocab {cfg.vocab_size}", [VOCAB_MISMATCH],
                       "pair the drafter with the target it was trained on")
        return ck("embed-tokens", "pass", "embed_tokens", ev)
    ev = f"present {tuple(emb.shape)}"
    tstate = tmeta.embedding() if tmeta is not None else {}
    temb = tstate.get(EMBED)
    if temb is None:
        why = f" ({tmeta.embedding_note})" if tmeta is not None and tmeta.embedding_note else ""
        return ck("embed-tokens", "pass", "embed_tokens", ev + "; no target embedding to compare" + why)
    if tuple(temb.shape) != tuple(emb.shape):
        return ck("embed-tokens", "fail", "embed_tokens", ev + f" vs target {tuple(temb.shape)}",
                   [VOCAB_MISMATCH], "pair the drafter with the target it was trained on")
    rel, cos = embedding_agreement(state, tstate)   # streamed by blocks of rows
    ev += f"; vs target's: relative difference {rel:.3g}, mean row cosine {cos:.3f}"
    if rel < 1e-2:
        return ck("embed-tokens", "pass", "embed_tokens", ev + " (the target's, as stored in fp16/bf16)")
    if cos < 0.2:
        return ck("embed-tokens", "warn", "embed_tokens", ev + ": unrelated to the target's "
                   "(random or another model's); vLLM uses it, SGLang replaces it with the target's",
                   [EMBED_RANDOM], "drop embed_tokens from the checkpoint if it was not trained "
                   "(TorchSpec #38), so every engine takes the target's")
    return ck("embed-tokens", "warn", "embed_tokens", ev + ": the drafter's own (fine-tuned?) "
               "embedding; engines that force the target's would change acceptance",
               [EMBED_TARGET_FORCED], "serve with an engine that keeps a loaded draft embedding "
               "(vLLM >= PR #28549)")


def check_rope(rep, tmeta) -> Check:
    cfg = rep.config
    ev = f"draft rope_theta {cfg.rope_theta}, scaling {cfg.rope_scaling}"
    if tmeta is None:
        return ck("rope", "skip", "RoPE vs target", ev + "; no target")
    params = tmeta.get("rope_parameters") or {}
    t_theta = float(tmeta.get("rope_theta") or params.get("rope_theta") or 10000.0)
    t_type = (tmeta.get("rope_scaling") or {}).get("rope_type") or params.get("rope_type", "default")
    d_type = (cfg.rope_scaling or {}).get("rope_type", (cfg.rope_scaling or {}).get("type", "default"))
    ev += f"; target rope_theta {t_theta}, type {t_type}"
    if t_theta != cfg.rope_theta or t_type != d_type:
        return ck("rope", "warn", "RoPE vs target", ev + ": engines use the draft config's values; "
                   "right only if the drafter was trained with them (EAGLE's Llama-3.1 drafts use "
                   "10000 against the target's 500000)", [ROPE_THETA_WRONG],
                   "keep the RoPE values the drafter was trained with in its config")
    return ck("rope", "pass", "RoPE vs target", ev)


def check_target_layout(tmeta) -> Check:
    """Text decoder or multimodal wrapper, decided from the config as data (target_layout.py)."""
    return layout_check(tmeta)


def check_vocab(rep, tmeta) -> Check:
    cfg = rep.config
    tv = tmeta.get("vocab_size") if tmeta else None
    ev = f"drafter vocab {cfg.vocab_size}, draft vocab {cfg.draft_vocab_size}, target vocab {tv}"
    if tv is not None and tv != cfg.vocab_size:
        return ck("vocab", "fail", "vocabulary", ev, [VOCAB_MISMATCH],
                   "pair the drafter with the target (and tokenizer) it was trained on")
    return ck("vocab", "pass" if tv is not None else "skip", "vocabulary", ev)
