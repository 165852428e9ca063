"""What each drafter checkpoint format can carry, for its reference consumer and engine version,
and what trainers leave in a file that is not drafter state (docs/formats.md).

Pure tables and checks over key names and DrafterConfig fields: knows nothing about reading or
writing files (save.py and convert.py do that and ask this module what is lost or ignored).
"""
from __future__ import annotations

import re

from eagle_nb.model.config import DrafterConfig

FORMATS = ("eagle", "sglang", "speculators")      # the drafter-directory formats (detect.py tells them apart)

# Keys trainers leave in a drafter file that are not drafter state: loading drops them with a
# warning that names them. Anything else unexpected (above all under the drafter's own names:
# midlayer., layers.0., fc., norm., lm_head.) stays an error.
HARMLESS_EXTRAS = (
    (r"target_model\..+", "state of the frozen target model (EAGLE's DeepSpeed save with "
     "exclude_frozen_parameters=True drops its parameters but keeps buffers such as "
     "rotary_emb.inv_freq)"),
    (r"(optimizer|optimizer_state|lr_scheduler|scheduler)(\..+)?|global_step|epoch",
     "optimizer / scheduler leftovers"),
)

# What the reference consumer of each format reads (docs/formats.md). A drafter feature outside
# its format is refused by save_drafter / convert unless allow_lossy=True.
#   eagle: SafeAILab EAGLE `eagle/model/cnets.py` Model: 3 aux layers, head_dim = H / heads,
#          rope_scaling linear or dynamic only, no EAGLE-3.1 flags.
#   sglang: SGLang 0.5.14 `llama_eagle3.py` (fc_norm and norm_output since 0.5.12;
#          norm_before_fc only since 0.5.17, norm_before_residual in no release read).
#   speculators: speculators / vLLM carry every flag.
FORMAT_LACKS = {
    "eagle": ("norm_before_fc", "fc_norm", "norm_output", "norm_before_residual"),
    "sglang": ("norm_before_fc", "norm_before_residual"),
    "speculators": (),
}


def unsupported_features(cfg: DrafterConfig, fmt: str) -> list[str]:
    """The features of `cfg` that format `fmt`'s consumer cannot express (empty: lossless)."""
    out = [f"{k}=True" for k in FORMAT_LACKS[fmt] if getattr(cfg, k)]
    if cfg.sliding_window and fmt != "speculators":
        out.append(f"sliding_window={cfg.sliding_window} (its Llama draft layer attends to every "
                   f"position)")
    if fmt == "eagle":
        if cfg.num_aux != 3:
            out.append(f"num_aux={cfg.num_aux} (EAGLE's fc is target_hidden_size*3 wide)")
        if cfg.head_dim * cfg.num_attention_heads != cfg.hidden_size:
            out.append(f"head_dim={cfg.head_dim} != hidden_size/num_attention_heads "
                       f"(EAGLE derives head_dim from hidden_size)")
        kind = (cfg.rope_scaling or {}).get("rope_type", (cfg.rope_scaling or {}).get("type"))
        if cfg.rope_scaling and kind not in ("linear", "dynamic"):
            out.append(f"rope_scaling type {kind!r} (EAGLE knows linear and dynamic only)")
    return out


def split_harmless(unexpected: list[str], where: str) -> tuple[list[str], list[str], list[str]]:
    """(still unexpected, ignored, warnings): each warning names the ignored keys of one kind."""
    ignored, notes = [], []
    for pattern, why in HARMLESS_EXTRAS:
        hit = [k for k in unexpected if re.fullmatch(pattern, k)]
        if hit:
            ignored += hit
            notes.append(f"{where}: ignored {len(hit)} key(s) that are not drafter state, {why}: {hit}")
    return [k for k in unexpected if k not in ignored], ignored, notes


def train_serve_warnings(raw_cfg: dict, cfg: DrafterConfig, fmt: str) -> list[str]:
    """Flags of a format-B (SpecForge-written) config whose meaning differs between SpecForge
    training and serving (docs/drafter.md)."""
    out = []
    if fmt != "sglang":
        return out
    if cfg.norm_output:
        out.append(
            "train/serve mismatch: norm_output=true. If SpecForge trained this draft, it fed the "
            "PRE-norm state back to the next draft step (algorithms/eagle3/model.py); SGLang "
            ">= 0.5.12 and vLLM serve them feeding the POST-norm state back, which is eagle_nb's "
            "default (feedback='serving'). Step-1 logits agree, later steps do not; load with "
            "feedback='pre-norm' to see what training optimised.")
    if raw_cfg.get("norm_output") is False:
        out.append(
            "train/serve mismatch: norm_output=false. If SpecForge trained this draft, it read that "
            "as 'logits without the final norm' (compute_logits); the engines and eagle_nb always "
            "apply the final norm.")
    return out
