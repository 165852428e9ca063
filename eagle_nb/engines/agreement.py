"""How far the engine's output and steps agree with the reference loop's: tokens per prompt (the
first divergence, the agreeing prefix) and, where the engine reports them per request (vLLM's
`per_step_accepted` at `--per-request-spec-decode-metrics detailed`), accepted counts step by
step. Pure functions of token lists, `SpecStats` and the engine's per-request metrics objects."""
from __future__ import annotations


def agreement(ref_ids, eng_ids) -> dict:
    """Token-level agreement per prompt, over the reference's length (both stop at EOS; an
    engine output shorter than the reference's is a divergence)."""
    rows = []
    for r, e in zip(ref_ids, eng_ids):
        if e is None:
            rows.append(None)
            continue
        n = len(r)
        first = next((i for i in range(n) if i >= len(e) or r[i] != e[i]), None)
        rows.append({"identical": first is None, "first_divergence": first,
                     "agreeing_prefix": n if first is None else first, "tokens": n})
    known = [x for x in rows if x is not None]
    if not known:
        return {"available": False, "prompts": len(rows)}
    return {"available": True, "prompts": len(rows), "identical": sum(x["identical"] for x in known),
            "agreeing_prefix_fraction": sum(x["agreeing_prefix"] for x in known) / sum(x["tokens"] for x in known),
            "first_divergence": [x["first_divergence"] for x in known]}


def step_agreement(ref_stats, details) -> dict | None:
    """Per request, the engine's own per-step accepted counts (vLLM's `per_step_accepted`, at
    `--per-request-spec-decode-metrics detailed`) against the reference loop's, step by step, and
    each request's tau: None when the engine gave no per-request metrics."""
    specs = [(d or {}).get("speculative_decoding") for d in (details or [])]
    if not specs or any(sp is None or "per_step_accepted" not in sp for sp in specs):
        return None
    same = [list(sp["per_step_accepted"]) == list(st.accept_counts) for sp, st in zip(specs, ref_stats)]
    return {"per_step_identical": sum(same), "per_step_first_differing": next(
                (i for i, ok in enumerate(same) if not ok), None),
            "per_request_tau_engine": [sp.get("mean_acceptance_length") for sp in specs],
            "per_request_tau_reference": [1 + sum(st.accept_counts) / len(st.accept_counts)
                                          if st.accept_counts else None for st in ref_stats]}
