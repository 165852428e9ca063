"""Layer-id conventions: which target hidden states EAGLE-3 reads, and how each engine numbers them.

Inside eagle_nb a layer id is an HF `hidden_states` index: id k is the residual stream entering
decoder layer k (0 = embedding output), id L (L = number of decoder layers) the last layer's
output before the final norm. `to_hf` / `from_hf` translate the vLLM/speculators (same) and the
SGLang-config/SpecForge (output of layer k = HF k+1) conventions (docs/layers.md). Knows nothing
about models or hooks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

CONVENTIONS = {
    # name: offset added to convert an id of this convention to the HF hidden_states index
    "hf": 0,
    "vllm": 0,           # vLLM aux_hidden_state_layers and top-level eagle_aux_hidden_state_layer_ids
    "speculators": 0,    # speculators eagle_aux_hidden_state_layer_ids
    "eagle": 0,          # SafeAILab EAGLE: state recorded before layer idx
    "sglang": 0,         # SGLang's internal layers_to_capture (after its +1)
    "sglang-config": 1,  # SGLang eagle_config.eagle_aux_hidden_state_layer_ids: output of layer k
    "specforge": 1,      # SpecForge aux_hidden_state_layer_ids: output of layer k
}


def eagle3_layers(num_layers: int) -> tuple[int, int, int]:
    """EAGLE-3 default feature layers: the *input* of decoder layers 2, L//2, L-3
    (== HF `hidden_states[i]`, since hidden_states[0] is the embedding output)."""
    ids = (2, num_layers // 2, num_layers - 3)
    if not ids[0] < ids[1] < ids[2]:
        raise ValueError(f"EAGLE-3 default layers {ids} are not distinct for a {num_layers}-layer "
                         f"target; pass explicit layer ids")
    return ids


def to_hf(ids, convention: str) -> list[int]:
    """Translate layer ids from `convention` to HF hidden_states indices."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown layer-id convention {convention!r}; known: {sorted(CONVENTIONS)}")
    return [int(i) + CONVENTIONS[convention] for i in ids]


def from_hf(ids, convention: str) -> list[int]:
    """Translate HF hidden_states indices to `convention`."""
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown layer-id convention {convention!r}; known: {sorted(CONVENTIONS)}")
    return [int(i) - CONVENTIONS[convention] for i in ids]


# SGLang model classes whose `set_eagle3_layers_to_capture` adds +1 to nested `eagle_config`
# ids only when the first id is 1 (SGLang PR #25454). Read in the released wheels: the rule is in
# `deepseek_v2.py` and `glm4_moe_lite.py` from 0.5.13 on (absent in 0.5.12 and earlier); every
# other model file (`llama.py`, `qwen2.py`, `qwen3.py`, `qwen3_moe.py`, ...) always adds 1, in
# every release read (0.5.9 to 0.5.23). The subclasses inherit the DeepSeek-V2 rule.
SGLANG_FIRST_ID_RULE_ARCHS = frozenset({
    "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
    "MistralLarge3ForCausalLM", "GlmMoeDsaForCausalLM", "KimiK25ForConditionalGeneration",
    "Glm4MoeLiteForCausalLM"})


SGLANG_FIRST_ID_RULE_SINCE = (0, 5, 13)


SGLANG_CURRENT = "0.5.14"


def sglang_version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for p in str(version).split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            raise ValueError(f"cannot read SGLang version {version!r} (want e.g. '0.5.14')")
        parts.append(int(digits))
    return tuple(parts)


def sglang_capture_ids(config_ids, architecture: str = "LlamaForCausalLM",
                       version: str = SGLANG_CURRENT) -> list[int]:
    """What SGLang actually captures (HF index) for nested `eagle_config` ids, for the target
    `architecture` (its config's `architectures[0]`) and SGLang `version`: +1 always, except for
    the DeepSeek-V2 / GLM-4-MoE-lite family from 0.5.13 on, where +1 applies only when the first
    id is 1 (docs/layers.md)."""
    ids = [int(i) for i in config_ids]
    since = sglang_version_tuple(version) >= SGLANG_FIRST_ID_RULE_SINCE
    first_id_rule = since and architecture in SGLANG_FIRST_ID_RULE_ARCHS
    if not first_id_rule or (ids and ids[0] == 1):
        return [i + 1 for i in ids]
    return ids


def check_layer_ids(ids, num_layers: int) -> list[int]:
    if isinstance(ids, (str, bytes)) or isinstance(ids, Iterator) or not isinstance(ids, Iterable):
        hint = ("; a generator can be read only once: pass list(...)" if isinstance(ids, Iterator)
                else f"; for one layer pass [{ids}]" if isinstance(ids, int) else "")
        raise TypeError(f"layer ids must be a list of HF hidden_states ids such as [2, 16, 29], "
                        f"got {type(ids).__name__} {ids!r}{hint}")
    bad_type = [i for i in ids if isinstance(i, bool) or int(i) != i]
    if bad_type:
        raise ValueError(f"layer ids must be integers, got {bad_type}")
    ids = [int(i) for i in ids]
    if len(ids) == 0:
        raise ValueError("no layer ids given")
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate layer ids {ids}")
    bad = [i for i in ids if not 0 <= i <= num_layers]
    if bad:
        raise ValueError(f"layer ids {bad} out of range: a {num_layers}-layer model has HF "
                         f"hidden_states ids 0..{num_layers} ({num_layers} = last layer output, pre-norm)")
    return sorted(ids)
