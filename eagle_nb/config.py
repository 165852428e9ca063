"""Configuration dataclasses: `DrafterConfig` (what an EAGLE-3 drafter is) with strict JSON round
trips from the three public config layouts, and `SpecConfig` (how to speculate).

Layer ids are stored in the HF `hidden_states` convention (see capture.py); readers of each format
translate from that format's own convention. Knows nothing about weights.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


class ConfigError(ValueError):
    """A checkpoint config is missing a field or holds an impossible value."""


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
    torch_dtype: str | None = None
    extra: dict = field(default_factory=dict)  # format-specific fields kept for round trips

    def __post_init__(self):
        if self.target_hidden_size is None:
            self.target_hidden_size = self.hidden_size
        if self.head_dim is None:
            if self.hidden_size % self.num_attention_heads:
                raise ConfigError(f"hidden_size {self.hidden_size} not divisible by "
                                  f"num_attention_heads {self.num_attention_heads}; set head_dim")
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.aux_layer_ids is not None:
            self.aux_layer_ids = sorted(int(i) for i in self.aux_layer_ids)
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
    theta = d.get("rope_theta", params.get("rope_theta", 10000.0))
    scaling = d.get("rope_scaling")
    if scaling is None and params.get("rope_type", "default") != "default":
        scaling = {k: v for k, v in params.items() if k != "rope_theta"}
    return float(theta), scaling


def from_llama_dict(d: dict, where: str, aux_layer_ids=None) -> DrafterConfig:
    """Common reader for a Llama-style dict (format A/B top level, format C transformer_layer_config)."""
    _require(d, where)
    theta, scaling = _rope(d)
    return DrafterConfig(
        hidden_size=d["hidden_size"], num_attention_heads=d["num_attention_heads"],
        num_key_value_heads=d.get("num_key_value_heads") or d["num_attention_heads"],
        intermediate_size=d["intermediate_size"], vocab_size=d["vocab_size"],
        draft_vocab_size=d.get("draft_vocab_size") or d["vocab_size"],
        target_hidden_size=d.get("target_hidden_size"), head_dim=d.get("head_dim"),
        rms_norm_eps=d.get("rms_norm_eps", 1e-6), rope_theta=theta, rope_scaling=scaling,
        max_position_embeddings=d.get("max_position_embeddings", 2048),
        aux_layer_ids=aux_layer_ids, torch_dtype=d.get("torch_dtype") or d.get("dtype"))


@dataclass
class SpecConfig:
    depth: int = 4                   # draft tokens per verify step (chain), k
    max_new_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    ablations: tuple[str, ...] = ()

    def __post_init__(self):
        if self.depth < 1:
            raise ValueError(f"depth must be >= 1, got {self.depth}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
