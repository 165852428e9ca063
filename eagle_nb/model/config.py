"""Configuration dataclasses: `DrafterConfig` (what an EAGLE-3 drafter is) with strict JSON round
trips from the three public config layouts, and `SpecConfig` (how to speculate).

Layer ids are stored in the HF `hidden_states` convention (see capture.py); readers of each format
translate from that format's own convention. Knows nothing about weights.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field

from eagle_nb.model.fault_names import FC_BYPASS

# How the drafter treats its input (drafter.py `fuse`) and what the target hands over (loop/chain.py):
# plain names, here so that the fault registry can name them without importing torch.
FC_STRICT = "strict"
FC_ENGINE_WIDTH_CHECK = "engine-width-check"  # FAULT: skip fc when the input is already H wide
FC_POLICIES = (FC_STRICT, FC_ENGINE_WIDTH_CHECK)
FEATURES_AUX = "aux"              # healthy: the captured aux layers, concatenated (n_aux*Ht)
FEATURES_FINAL = "final-hidden"   # fault: the target hands over its final (post-norm) state (Ht)
FEATURES_NONE = "none"            # target-only decoding: no features at all (greedy_reference)
FEATURE_MODES = (FEATURES_AUX, FEATURES_FINAL, FEATURES_NONE)
# verify rules at T > 0 (loop/verify_rules.py)
ARGMAX, SAMPLED, STRICT = "argmax", "sampled", "strict"
VERIFY_RULES = (ARGMAX, SAMPLED, STRICT)
DEFAULT_RULE = SAMPLED       # the kit's chain loop before rules were selectable (the papers)
# What each rule is called where it is implemented (docs/metrics.md cites the files).
ENGINE_NAMES = {
    ARGMAX: "vLLM speculative_config draft_sample_method='greedy' (default), rejection_sample_method='standard'",
    SAMPLED: "vLLM draft_sample_method='probabilistic'; SGLang >= PR #26312; Leviathan/Chen rejection sampling",
    STRICT: "exact match against the target's sample: vLLM Model Runner V2 before PR #40651; llama.cpp",
}


def check_rule(rule: str) -> str:
    if rule not in VERIFY_RULES:
        raise ValueError(f"unknown verify rule {rule!r}; choose from {list(VERIFY_RULES)} "
                         f"(docs/metrics.md, 'Verify rules')")
    return rule


class ConfigError(ValueError):
    """A checkpoint config is missing a field or holds an impossible value."""


# -- typed field checks: every message names the field, the value and its type ----------------------
def _got(v) -> str:
    return f"got {v!r} ({type(v).__name__})"


def check_int(name: str, v, lo: int = 1, hi: int | None = None, hint: str = "") -> int:
    """An int (not a bool, not a string such as "192") in [lo, hi]."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise ConfigError(f"{name} must be an integer, {_got(v)}{hint}")
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ConfigError(f"{name} must be {rng}, got {v}{hint}")
    return v


def check_float(name: str, v, *, positive: bool = False, lo: float | None = None, hint: str = "") -> float:
    """A finite real number (ints accepted, strings such as "1e-5" refused)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ConfigError(f"{name} must be a number, {_got(v)}{hint}")
    if not math.isfinite(v):
        raise ConfigError(f"{name} must be finite, got {v}{hint}")
    if positive and v <= 0:
        raise ConfigError(f"{name} must be > 0, got {v}{hint}")
    if lo is not None and v < lo:
        raise ConfigError(f"{name} must be >= {lo}, got {v}{hint}")
    return float(v)


def check_bool(name: str, v) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(f"{name} must be true or false, {_got(v)}")
    return v


def check_layer_ids(name: str, ids) -> list[int]:
    """A list of distinct non-negative integer layer ids (not a string such as "2,4,5")."""
    if not isinstance(ids, (list, tuple, range)):
        raise ConfigError(f"{name} must be a list of integers such as [2, 4, 5], {_got(ids)}")
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, numbers.Integral):
            raise ConfigError(f"{name} must be a list of integers such as [2, 4, 5]; element {i!r} "
                              f"is a {type(i).__name__}")
    if not ids:
        raise ConfigError(f"{name} is empty; EAGLE-3 fuses at least one (usually three) target layers")
    dup = sorted({i for i in ids if list(ids).count(i) > 1})
    if dup:
        raise ConfigError(f"{name} {list(ids)} repeats layer id(s) {dup}; each captured layer must "
                          f"appear once (the fc input would concatenate the same state twice)")
    return list(ids)


@dataclass
class DrafterConfig:
    hidden_size: int                 # drafter width H
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int                  # target vocabulary V
    draft_vocab_size: int            # reduced draft vocabulary Vd (d2t/t2d map between them)
    target_hidden_size: int | None = None   # width of each captured target layer (default H)
    head_dim: int | None = None
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    aux_layer_ids: list[int] | None = None  # HF convention; None = EAGLE default {2, L//2, L-3}
    num_aux: int = 3
    norm_before_fc: bool = False     # one RMSNorm(n_aux*Ht) before fc (`input_norm`)
    fc_norm: bool = False            # one RMSNorm(Ht) per aux chunk before fc (`fc_norm.{i}`)
    norm_before_residual: bool = False
    norm_output: bool = False        # feed the post-norm state back across draft steps
    sliding_window: int | None = None   # set: each query sees its last W positions (itself included)
    torch_dtype: str | None = None
    extra: dict = field(default_factory=dict)  # format-specific fields kept for round trips

    def __post_init__(self):
        for name in ("hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                     "vocab_size", "draft_vocab_size", "max_position_embeddings", "num_aux"):
            setattr(self, name, check_int(name, getattr(self, name)))
        for name in ("target_hidden_size", "head_dim", "sliding_window"):
            if getattr(self, name) is not None:
                setattr(self, name, check_int(name, getattr(self, name)))
        self.rms_norm_eps = check_float("rms_norm_eps", self.rms_norm_eps, positive=True)
        self.rope_theta = check_float("rope_theta", self.rope_theta, positive=True,
                                      hint=" (RoPE base; a value <= 0 makes every rotary angle NaN)")
        if self.rope_scaling is not None and not isinstance(self.rope_scaling, dict):
            raise ConfigError(f"rope_scaling must be an object or null, {_got(self.rope_scaling)}")
        for name in ("norm_before_fc", "fc_norm", "norm_before_residual", "norm_output"):
            check_bool(name, getattr(self, name))
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(f"num_key_value_heads {self.num_key_value_heads} does not divide "
                              f"num_attention_heads {self.num_attention_heads}; grouped-query "
                              f"attention needs heads = groups x kv heads")
        if self.target_hidden_size is None:
            self.target_hidden_size = self.hidden_size
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ConfigError(f"hidden_size {self.hidden_size} not divisible by "
                                  f"num_attention_heads {self.num_attention_heads}; set head_dim")
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.head_dim % 2:
            raise ConfigError(f"head_dim {self.head_dim} is odd; rotary embeddings rotate pairs")
        if self.aux_layer_ids is not None:
            self.aux_layer_ids = sorted(check_layer_ids("aux_layer_ids", self.aux_layer_ids))
            if self.aux_layer_ids[0] < 0:
                raise ConfigError(f"aux_layer_ids {self.aux_layer_ids} holds a negative layer id")
            self.num_aux = len(self.aux_layer_ids)
        if self.draft_vocab_size > self.vocab_size:
            raise ConfigError(f"draft_vocab_size {self.draft_vocab_size} > vocab_size {self.vocab_size}")

    @property
    def fc_in_features(self) -> int:
        return self.num_aux * self.target_hidden_size

    def to_dict(self) -> dict:
        return asdict(self)


REQUIRED = ("hidden_size", "num_attention_heads", "intermediate_size", "vocab_size")


def _require(d: dict, where: str, keys=REQUIRED) -> None:
    missing = [k for k in keys if d.get(k) is None]
    if missing:
        raise ConfigError(f"{where}: missing required field(s) {missing}")


def _rope(d: dict) -> tuple[float, dict | None]:
    params = d.get("rope_parameters") or {}
    if not isinstance(params, dict):
        raise ConfigError(f"rope_parameters must be an object, {_got(params)}")
    theta = d.get("rope_theta", params.get("rope_theta", 10000.0))
    scaling = d.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default":
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    return theta, scaling


SUPPORTED_ACT = "silu"
LAYER_TYPES = ("full_attention", "sliding_attention")


def _window(d: dict) -> int | None:
    """The draft layer's attention window: `layer_types: ["sliding_attention"]` with
    `sliding_window` (transformers >= 4.54), or Qwen2's `use_sliding_window` (which slides layer 0
    only when `max_window_layers` is 0); None for full attention."""
    types, w = d.get("layer_types"), d.get("sliding_window")
    if types is not None:
        if not isinstance(types, list) or len(types) != 1 or types[0] not in LAYER_TYPES:
            raise ConfigError(f"layer_types must list the one draft layer's attention, "
                              f"{list(LAYER_TYPES)[0]!r} or {LAYER_TYPES[1]!r}, {_got(types)}")
        sliding = types[0] == "sliding_attention"
        if sliding and w is None:
            raise ConfigError("layer_types says 'sliding_attention' but sliding_window is not set; "
                              "give the window in tokens")
    else:
        sliding = d.get("use_sliding_window") is True and w is not None and \
            not _default(d, "max_window_layers", 0)
    return check_int("sliding_window", w) if sliding else None


def _default(d: dict, key: str, fallback):
    """d[key] unless it is absent or null (0 and "" are values to check, not defaults)."""
    v = d.get(key)
    return fallback if v is None else v


def from_llama_dict(d: dict, where: str, aux_layer_ids=None) -> DrafterConfig:
    """Common reader for a Llama-style dict (format A/B top level, format C transformer_layer_config)."""
    _require(d, where)
    act = _default(d, "hidden_act", SUPPORTED_ACT)
    if act != SUPPORTED_ACT:
        raise ConfigError(f"hidden_act {act!r} is not supported: the EAGLE-3 draft layer is a Llama "
                          f"layer with SiLU, as in vLLM and SGLang (whose Llama MLP refuses any other "
                          f"activation); a drafter trained with {act!r} would run wrongly there too")
    theta, scaling = _rope(d)
    return DrafterConfig(
        hidden_size=d["hidden_size"], num_attention_heads=d["num_attention_heads"],
        num_key_value_heads=_default(d, "num_key_value_heads", d["num_attention_heads"]),
        intermediate_size=d["intermediate_size"], vocab_size=d["vocab_size"],
        draft_vocab_size=_default(d, "draft_vocab_size", d["vocab_size"]),
        target_hidden_size=d.get("target_hidden_size"), head_dim=d.get("head_dim"),
        rms_norm_eps=_default(d, "rms_norm_eps", 1e-6), rope_theta=theta, rope_scaling=scaling,
        max_position_embeddings=_default(d, "max_position_embeddings", 2048),
        aux_layer_ids=aux_layer_ids, sliding_window=_window(d),
        torch_dtype=d.get("torch_dtype") or d.get("dtype"))


MAX_DEPTH = 32   # chain drafts deeper than this never pay (τ saturates near 4-8) and cost memory


@dataclass
class SpecConfig:
    """How to speculate. The one place run parameters are checked: the CLI, `generate()`, the
    notebooks' sessions and the report parameters all construct one, so a bad value gets the same
    message everywhere (it names the field and its CLI flag)."""
    depth: int = 4                   # draft tokens per verify step (chain), k
    max_new_tokens: int = 64         # further bounded by the target's context at decode time
    temperature: float = 0.0
    seed: int = 0
    ablations: tuple[str, ...] = ()

    def __post_init__(self):
        check_int("depth (--depth)", self.depth, 1, MAX_DEPTH, hint=" (draft tokens per verify step)")
        check_int("max_new_tokens (--max-new-tokens)", self.max_new_tokens, 1)
        self.temperature = check_float("temperature (--temperature)", self.temperature, lo=0.0,
                                       hint=" (0 = greedy; a negative value would sample from "
                                            "softmax(-logits))")
        check_int("seed (--seed)", self.seed, 0)
        if isinstance(self.ablations, str) or not all(isinstance(a, str) for a in self.ablations):
            raise ConfigError(f"ablations must be a list of names such as [{FC_BYPASS!r}], "
                              f"{_got(self.ablations)}")
        self.ablations = tuple(self.ablations)
