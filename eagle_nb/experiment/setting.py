"""One experiment as a value: `Setting` (faults, layer-id override, depth, temperature, new tokens,
seed, tree shape, verify rule, serving conditions). Frozen and hashable, so it is the cache key of `Pair.run` and the coordinate of a `Sweep`.

Depth, temperature, new tokens and seed are checked by `config.SpecConfig` (one place for those
rules); fault names by `faults.check` and condition names by `conditions.registry.check`, which
also put them in application order, so two settings that list the same names differently are
equal. Knows nothing about models or prompts.
"""
from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

from eagle_nb.conditions import registry as C
from eagle_nb.experiment import faults as F
from eagle_nb.model.config import SpecConfig

CHAIN = "chain"     # the shape of a setting with topk 1 (`Setting.shape`)


@dataclass(frozen=True)
class Setting:
    faults: tuple[str, ...] = ()              # named faults (faults.FAULTS), application order
    layer_ids: tuple[int, ...] | None = None  # HF ids to capture instead of the drafter's own
    depth: int = 4                            # draft steps k (chain depth; SGLang num_steps)
    temperature: float = 0.0
    max_new_tokens: int = 64
    seed: int = 0
    topk: int = 1                             # tree branching (SGLang eagle_topk); 1 = chain
    num_draft_tokens: int | None = None       # tree nodes verified per step, root included
    verify_rule: str | None = None            # T > 0 chains: argmax | sampled | strict; None:
    #                                           the loop's default (loop/verify_rules.py)
    conditions: tuple[str, ...] = ()          # serving conditions (conditions/registry.py)

    def __post_init__(self):
        set_ = object.__setattr__              # frozen: normalise once, here
        set_(self, "faults", F.check(self.faults))
        if isinstance(self.conditions, str):
            raise ValueError(f"conditions is a tuple of names; got the string {self.conditions!r}")
        set_(self, "conditions", C.check(self.conditions))
        if self.layer_ids is not None:
            set_(self, "layer_ids", tuple(sorted(int(i) for i in self.layer_ids)))
        set_(self, "depth", int(self.depth))
        set_(self, "temperature", float(self.temperature))
        set_(self, "max_new_tokens", int(self.max_new_tokens))
        SpecConfig(depth=self.depth, max_new_tokens=self.max_new_tokens,
                   temperature=self.temperature, seed=self.seed)
        from eagle_nb.loop.tree_shape import resolve_num_draft_tokens
        set_(self, "topk", int(self.topk))
        set_(self, "num_draft_tokens", resolve_num_draft_tokens(self.depth, self.topk,
                                                                self.num_draft_tokens))
        if self.verify_rule is not None:
            from eagle_nb.model.config import check_rule
            check_rule(self.verify_rule)
            if self.is_tree:
                raise ValueError(f"verify_rule {self.verify_rule!r} applies to chains; a tree (topk "
                                 f"{self.topk}) verifies its top-k drafts with SGLang's tree sampling "
                                 "(loop/tree_accept.py): leave verify_rule unset")

    @property
    def is_tree(self) -> bool:
        return self.topk > 1

    @classmethod
    def of(cls, toggled=(), layer_shift: int = 0, **kw) -> "Setting":
        """A setting from panel-style controls: toggled faults plus a layer-id shift (-1, 0, +1)."""
        return cls(faults=F.ablations_for(toggled, layer_shift), **kw)

    @property
    def shape(self) -> str:
        """The draft shape in words, the one name every label, table and control uses: 'chain', or
        'tree topk 2, 6 nodes' (branches per step, nodes verified per step with the root). The
        depth is not in it: it is a coordinate of its own (k=...)."""
        return CHAIN if not self.is_tree else f"tree topk {self.topk}, {self.num_draft_tokens} nodes"

    @property
    def label(self) -> str:
        """Faults and conditions in words: 'healthy', 'fc-bypass + layer-ids+1', 'template-raw',
        with any layer override, and the
        shape of a tree ('healthy, tree topk 2, 6 nodes'); a chain's label does not say 'chain'."""
        s = F.label(self.faults + self.conditions)
        if self.layer_ids is not None:
            s = f"{s}, layers {list(self.layer_ids)}"
        if self.verify_rule is not None:
            s = f"{s}, verify {self.verify_rule}"
        return f"{s}, {self.shape}" if self.is_tree else s

    @property
    def layer_shift(self) -> int:
        return sum(by for by, name in F.SHIFTS.items() if name in self.faults)

    def but(self, **changes) -> "Setting":
        return replace(self, **changes)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["faults"] = list(self.faults)
        d["conditions"] = list(self.conditions)
        d["layer_ids"] = None if self.layer_ids is None else list(self.layer_ids)
        return d


def grid(faults=((),), depths=(4,), temperatures=(0.0,), **common) -> list[Setting]:
    """Every (faults, temperature, depth) combination, in that nesting order."""
    return [Setting(faults=tuple(f), depth=k, temperature=T, **common)
            for f, T, k in itertools.product(faults, temperatures, depths)]
