"""SGLang as an engine entry: read from its log and its `/metrics` page only (the kit does not
launch it). Facts from SGLang's own source:

- log (`scheduler_metrics_mixin.py`): "Decode batch, #running-req: N, ..., accept len: %.2f,
  accept rate: %.2f, ...". The line is the same under both accept-rate formulas SGLang printed
  (`loop.metrics.SGLANG_RATE_FORMULAS`); which one a log used, and so how many draft tokens it
  verified, is inferred from the numbers (`engines.sglang_formula`): 1.05 and 0.21 fit
  `accept_len / num_draft_tokens` with 5 draft tokens only, so a chain of k = 4;
- `/metrics`: gauges `sglang:spec_accept_length`, `sglang:spec_accept_rate` of the last log
  interval, which cannot be differenced around a run.
Its speculation conventions: a simulated mean acceptance length (bonus included) for synthetic
acceptance, a chain's flags, and the nested `eagle_config` aux ids it shifts by its class's rule.
Knows SGLang's lines and gauges; no model code.
"""
from __future__ import annotations

from eagle_nb.engines.entry import NUM, Engine, fields, mean_se
from eagle_nb.loop.metrics import SGLANG_RATE_FORMULAS as FORMULAS
from eagle_nb.engines.sglang_formula import infer_sglang_formula
from eagle_nb.model.layers import sglang_capture_ids
from eagle_nb.profiles import knobs as K

NAME = "sglang"
FIELDS = {
    "accept_length": rf"accept len:\s*{NUM}",
    "accept_rate": rf"accept rate:\s*{NUM}",
    "running_req": rf"#running-req:\s*{NUM}",
    "gen_throughput": rf"gen throughput \(token/s\):\s*{NUM}",
}


def parse_line(line: str) -> dict | None:
    f = fields(line, FIELDS)
    return f if "accept_length" in f and "accept_rate" in f else None


def summarise(s, text: str, num_draft_tokens=None) -> tuple[dict | None, dict]:
    """Mean accept len and rate, and the accept-rate formula the numbers fit; with it, each line's
    accepted share of the drafts (`draft_acceptance_rate`)."""
    if not len(s):
        return None, {}
    out = {"lines": len(s), "mean_accept_length": float(s.accept_length.mean()),
           "mean_accept_rate": float(s.accept_rate.mean()),
           **infer_sglang_formula(s.accept_length.tolist(), s.accept_rate.tolist(), num_draft_tokens)}
    n = out["num_draft_tokens"]
    if out["formula"] in FORMULAS and n:
        return out, {"draft_acceptance_rate": (s.accept_length - 1) / (n - 1)}
    return out, {}


def depth_of(lengths, rates) -> tuple[int | None, str | None]:
    """(chain depth, how it was inferred) from SGLang's accept len / accept rate pairs: the one
    formula and draft-token count that explain every line; a chain verifies k + 1 tokens (topk 1).
    (None, why not) when the rates are missing or do not decide."""
    if not rates or any(r is None or r != r for r in rates):
        return None, "the log lines carry no accept rate: give --depth"
    f = infer_sglang_formula(lengths, rates)
    n = f.get("num_draft_tokens")
    if f["formula"] not in FORMULAS or f["explains"] < 1.0 or not n:
        return None, (f"accept len / accept rate do not decide the draft-token count "
                      f"({f['formula']}): give --depth")
    return n - 1, (f"k = {n - 1} inferred from accept len / accept rate: {FORMULAS[f['formula']]} with "
                   f"{n} draft tokens, a chain (topk 1)")


def observe(s, summary: dict, text: str) -> dict:
    """tau: the mean accept len of the lines; the depth their accept rates imply."""
    lengths = list(s.accept_length)
    tau, se = mean_se(lengths)
    depth, note = depth_of(lengths, list(s.accept_rate))
    return {"tau": tau, "depth": depth, "tau_se": se, "depth_note": note}


def knobs(p, k: int | None = None, drafter: str | None = None) -> dict:
    """Its environment (`SGLANG_SIMULATE_ACC_LEN`: the mean acceptance length **with** the bonus,
    `python/sglang/srt/environ.py`; `match-expected` draws the floor or the ceiling per batch step
    so the mean is exact, `speculative/spec_utils.py`) and its chain flags at depth k."""
    k = K.depth(p, k)
    return {"env": {"SGLANG_SIMULATE_ACC_LEN": f"{K.acceptance_length(p, k):.4f}",
                    "SGLANG_SIMULATE_ACC_METHOD": "match-expected"},
            "flags": draft_flags(k)}


def render_knobs(s: dict) -> str:
    env = " ".join(f"{k}={v}" for k, v in s["env"].items())
    flags = " ".join(f"{k} {v}" for k, v in s["flags"].items())
    return (f"# SGLang: simulated mean acceptance length (bonus token included)\n"
            f"{env} python -m sglang.launch_server --model-path TARGET "
            f"--speculative-algorithm EAGLE3 --speculative-draft-model-path DRAFTER {flags}")


def draft_flags(k: int) -> dict | str:
    if not k:
        return "no --speculative-algorithm (speculation does not pay)"
    return {"--speculative-num-steps": k, "--speculative-eagle-topk": 1,
            "--speculative-num-draft-tokens": k + 1}


def captures(raw_cfg: dict, default: list[int]) -> dict[str, list[int]]:
    """SGLang reads the nested `eagle_config` ids; its classes differ in how they shift them."""
    nested = (raw_cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    return {"SGLang llama.py (+1 always)":
            sglang_capture_ids(nested, "LlamaForCausalLM") if nested else default,
            "SGLang first-id rule (PR #25454; DeepSeek-V2 / GLM-4-MoE-lite family, >= 0.5.13)":
            sglang_capture_ids(nested, "DeepseekV2ForCausalLM") if nested else default}


ENTRY = Engine(
    NAME, "SGLang", log_mark="accept len", parse_line=parse_line,
    time_pattern=(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", "%Y-%m-%d %H:%M:%S"),
    summarise=summarise, observe=observe,
    gauge_prefix="sglang:spec_", tau_gauge="spec_accept_length",
    knobs=knobs, render_knobs=render_knobs, draft_flags=draft_flags, captures=captures,
    target_needs="SGLang: the target class must define `set_eagle3_layers_to_capture` and pass its "
                 "`aux_hidden_states` to the logits processor; when they are missing the drafter is "
                 "handed the final hidden state and `llama_eagle3.py` skips `fc` by its width check")
