"""The static half of `context-past-training`: does the drafter's declared context cover the
target's, and do their RoPE settings agree? A pure function of the two configs
(docs/conditions.md, "Context length").

Past its `max_position_embeddings` (or past the lengths it was trained on) a drafter runs at RoPE
positions it never saw: an EAGLE-3 head declaring 2048 was slower than no speculation above 2k
(sgl-project/sglang #6783), and a Qwen3-8B EAGLE-3 fell from tau 2.30 at 2k to 1.08 at 20k
(vllm-project/speculators PR #684). The drafter runs at the target's positions, so a target whose
context is stretched by RoPE scaling (YaRN, llama3) needs the same schedule in the drafter
(NVIDIA-NeMo/Automodel PR #2399).

Configs are plain dicts (config.json: flat, with a `text_config`, or speculators' with a
`transformer_layer_config`) or objects with the same attributes (`DrafterConfig`, an HF config).
RoPE is read as transformers writes it: `rope_theta`/`rope_scaling`, or `rope_parameters`.
Knows configs only.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

OK, WARN = "ok", "warn"


def _as_dict(cfg) -> dict:
    if isinstance(cfg, dict):
        return cfg
    return cfg.to_dict() if hasattr(cfg, "to_dict") else dict(vars(cfg))


def context_fields(cfg) -> dict:
    """{max_position_embeddings, rope_theta, rope_scaling} of a config dict or object (nested
    text/transformer-layer configs unwrapped; rope_scaling None for the default RoPE)."""
    d = _as_dict(cfg)
    for nested in ("transformer_layer_config", "text_config"):
        if isinstance(d.get(nested), dict):
            d = {**d, **d[nested]}
    params = d.get("rope_parameters") or {}
    theta = d.get("rope_theta") or params.get("rope_theta")
    scaling = d.get("rope_scaling")
    if not scaling and params.get("rope_type", "default") != "default":
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    if isinstance(scaling, dict) and scaling.get("rope_type", scaling.get("type")) == "default":
        scaling = None
    return {"max_position_embeddings": d.get("max_position_embeddings"), "rope_theta": theta,
            "rope_scaling": scaling or None}


@dataclass
class ContextCheck:
    status: str                                  # ok | warn
    drafter: dict
    target: dict
    trained_length: int | None = None
    findings: list = field(default_factory=list)

    @property
    def drafter_limit(self) -> int | None:
        """The longest context the drafter is known to handle: its trained length, else its
        declared max_position_embeddings."""
        return self.trained_length or self.drafter["max_position_embeddings"]

    def as_dict(self) -> dict:
        return {**asdict(self), "drafter_limit": self.drafter_limit}


def check_context(drafter_cfg, target_cfg, trained_length: int | None = None,
                  workload_lengths=None) -> ContextCheck:
    """Compare the drafter's context and RoPE with the target's. `trained_length`: the longest
    sequence the drafter was trained on, when known; `workload_lengths`: request lengths (prompt +
    expected output) to count against the drafter's limit."""
    dr, tg = context_fields(drafter_cfg), context_fields(target_cfg)
    chk = ContextCheck(OK, dr, tg, trained_length)
    dmax, tmax = dr["max_position_embeddings"], tg["max_position_embeddings"]
    if dmax and tmax and dmax < tmax:
        chk.findings.append(f"the drafter declares max_position_embeddings {dmax}, the target {tmax}: "
                            f"requests longer than {dmax} run the drafter at RoPE positions it never "
                            f"had (sglang #6783)")
    if trained_length and tmax and trained_length < tmax:
        chk.findings.append(f"the drafter was trained on sequences of at most {trained_length} tokens; "
                            f"the target serves {tmax}: acceptance falls past the trained length "
                            f"(speculators PR #684)")
    if dr["rope_theta"] and tg["rope_theta"] and float(dr["rope_theta"]) != float(tg["rope_theta"]):
        chk.findings.append(f"RoPE theta differs: drafter {dr['rope_theta']:g}, target "
                            f"{float(tg['rope_theta']):g} (the drafter runs at the target's positions)")
    if tg["rope_scaling"] != dr["rope_scaling"]:
        chk.findings.append(f"RoPE scaling differs: drafter {dr['rope_scaling']}, target "
                            f"{tg['rope_scaling']}: a stretched target context needs the same schedule "
                            f"in the drafter (NVIDIA-NeMo/Automodel PR #2399)")
    limit = chk.drafter_limit
    if workload_lengths is not None and limit:
        over = [n for n in workload_lengths if n > limit]
        if over:
            chk.findings.append(f"{len(over)} of {len(workload_lengths)} requests are longer than the "
                                f"drafter's {limit} tokens (longest {max(over)})")
    chk.status = WARN if chk.findings else OK
    return chk
