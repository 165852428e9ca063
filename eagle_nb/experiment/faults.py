"""Named faults from real EAGLE-3 debugging stories, switched on deliberately (never by default).

A fault is one `Fault` entry in `FAULTS`: its name, the story, a public reference, what it
changes, and `apply`, a pure function `Wiring -> Wiring`. `Wiring` is everything the speculation
loop is given: which target object, which drafter object, the captured layer ids, which features
the target hands over (aux | final-hidden), the fc policy, the d2t table in use and how prompts
are wrapped. The healthy wiring comes from the pair; faults transform it in registry order;
`speculate.generate` receives its fields as explicit arguments. No module is mutated: a drafter
fault hands over a `_variant`, a shallow copy sharing every weight with its own submodule table.
The catalogue (catalogue.py) measures every entry; the doctor (doctor.py) ranks them.

Costly objects a fault needs (the multimodal wrapper, the engine-style non-strict drafter) come
from `Builds`, which builds each once per pair and hands the same object back afterwards.

How to add a fault (this module only):
  1. write `def _my_fault(w: Wiring, b: Builds) -> Wiring` that returns `w.but(...)` with the
     fields it changes, plus `note=` text for anything the run should report; if it needs a costly
     object, get it with `b.get("my-object", lambda: build_it(b.target, b.drafter))` (memoised);
  2. add `Fault("my-fault", story, reference, changes, _my_fault, fix=...)` to `FAULTS` (raise
     `NotApplicable` from `_my_fault` on a pair that cannot have it), at the place in
     the list where it must be applied (loader faults replace the drafter first, then what the
     target hands over, then layer ids);
  3. run `tests/test_faults.py`: every registered fault is applied there to the shipped pair by
     name, and must change only the `Wiring` fields its `changes` string lists (comma-separated).
A fault that needs something the loop is not yet given (a field not in `Wiring`) also needs that
field here and an argument in `speculate.generate`.

Knows the drafter and capture APIs and the checkpoint loaders; runs no model itself.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Callable

import torch
from torch import nn

from eagle_nb.loop.chain import FEATURES_AUX, FEATURES_FINAL
from eagle_nb.model.decoder import engine_style_layers
from eagle_nb.model.drafter import FC_ENGINE_WIDTH_CHECK, FC_STRICT


@dataclass(frozen=True)
class Wiring:
    """What the speculation loop is given. Frozen: a fault returns a new one (`but`)."""
    target: object
    drafter: object
    layer_ids: tuple[int, ...]        # HF hidden_states ids captured from the target
    features: str = FEATURES_AUX      # what the target hands over: aux | final-hidden
    fc_policy: str = FC_STRICT        # strict, or the engines' width check
    d2t: torch.Tensor | None = None   # the d2t in use; None = the drafter's own
    prompt_format: str = "{prompt}"   # how a prompt is wrapped before tokenising (serving template)
    notes: tuple[str, ...] = ()

    def but(self, note: str | None = None, **changes) -> "Wiring":
        notes = self.notes + ((note,) if note else ())
        return replace(self, notes=notes, **changes)

    def d2t_in_use(self) -> torch.Tensor:
        return self.drafter.d2t if self.d2t is None else self.d2t

    def describe(self) -> dict:
        """The plain-data part (what a RunResult records)."""
        return {"layer_ids_hf": list(self.layer_ids), "feature_mode": self.features,
                "fc_policy": self.fc_policy,
                "d2t": "drafter's own" if self.d2t is None else "replaced by a fault",
                "prompt_format": self.prompt_format}


class Builds:
    """Costly objects faults need, built once per pair on first use and reused."""

    def __init__(self, target, drafter, speculators_path=None):
        self.target, self.drafter, self.speculators_path = target, drafter, speculators_path
        self._made: dict = {}

    def get(self, name: str, build: Callable[[], object]):
        if name not in self._made:
            self._made[name] = build()
        return self._made[name]


@dataclass(frozen=True)
class Fault:
    name: str
    story: str                 # what goes wrong, as a user meets it
    reference: str             # where it is documented publicly
    changes: str               # which Wiring fields it changes
    apply: Callable[[Wiring, Builds], Wiring] = field(repr=False)
    fix: str = ""              # what the user changes to get rid of it


# -- the transformations ---------------------------------------------------------------------------
def _engine_drafter(w: Wiring, b: Builds) -> Wiring:
    if b.speculators_path is None:
        raise ValueError("layers0-keys-dropped needs a speculators-format checkpoint path")

    def build():
        from eagle_nb.checkpoints.load import load_drafter_engine_style
        d, info = load_drafter_engine_style(b.speculators_path, b.target)
        return d.to(b.drafter.fc.weight.device, b.drafter.fc.weight.dtype), info

    d, info = b.get("engine-style-drafter", build)
    return w.but(drafter=d, d2t=None,
                 note=f"engine-style load dropped {len(info['dropped'])} keys and left "
                      f"{len(info['left_random'])} parameters at random init")


def _d2t_absolute(w: Wiring, b: Builds) -> Wiring:
    d2t = w.d2t_in_use()
    return w.but(d2t=d2t - torch.arange(d2t.numel(), device=d2t.device))


def _final_hidden(w: Wiring, b: Builds) -> Wiring:
    return w.but(features=FEATURES_FINAL, fc_policy=FC_ENGINE_WIDTH_CHECK)


def _wrapper(w: Wiring, b: Builds) -> Wiring:
    from eagle_nb.model.targets import make_wrapper
    wrapped = b.get("wrapper", lambda: make_wrapper(b.target))
    w = w.but(target=wrapped)
    if engine_style_layers(wrapped) is None:        # what the engine's capture code sees
        w = _final_hidden(w, b).but(
            note=f"engine-style capture found no `model.layers` on {type(wrapped).__name__}: "
                 "final hidden state handed over")
    return w


def _shift(by: int):
    def apply(w: Wiring, b: Builds) -> Wiring:
        return w.but(layer_ids=tuple(i + by for i in w.layer_ids))
    return apply


class NotApplicable(ValueError):
    """The fault cannot happen on this pair (e.g. a flag it drops is not set)."""


def _variant(module: nn.Module, **attrs) -> nn.Module:
    """A shallow copy sharing every weight, with its own module/parameter/buffer tables, so
    replacing a submodule, buffer or the config on it leaves the original untouched."""
    v = copy.copy(module)
    v._modules, v._parameters, v._buffers = dict(module._modules), dict(module._parameters), \
        dict(module._buffers)
    v.__dict__.pop("_rope_tab", None)
    v.__dict__.pop("_fused", None)
    for k, val in attrs.items():
        setattr(v, k, val)
    return v


def _with_config(d, note: str | None = None, **changes):
    from dataclasses import replace as dc_replace

    from eagle_nb.model.drafter import rope_inv_freq
    cfg = dc_replace(d.config, **changes)
    v = _variant(d, config=cfg)
    if "rope_theta" in changes or "rope_scaling" in changes:
        v._buffers["inv_freq"] = rope_inv_freq(cfg).to(d.inv_freq.device)
    return v


def _d2t_identity(w: Wiring, b: Builds) -> Wiring:
    return w.but(d2t=torch.zeros_like(w.d2t_in_use()))


def _heuristic_ids(w: Wiring, b: Builds) -> Wiring:
    from eagle_nb.model.decoder import num_decoder_layers
    from eagle_nb.model.layers import eagle3_layers
    ids = tuple(eagle3_layers(num_decoder_layers(b.target)))
    if ids == tuple(w.layer_ids):
        raise NotApplicable(f"the drafter's ids {list(w.layer_ids)} already are the heuristic's")
    return w.but(layer_ids=ids)


def _seeded(build, seed: int = 0):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def _embed_random(w: Wiring, b: Builds) -> Wiring:
    d = w.drafter

    def build():
        e = d.embed_tokens.weight
        std = float(e.detach().float().std())
        emb = nn.Embedding(*e.shape).to(e.device, e.dtype)
        nn.init.normal_(emb.weight, std=std)            # same scale, no relation to the target
        return _variant(d, embed_tokens=emb)
    return w.but(drafter=b.get(("embed-random", id(d)), lambda: _seeded(build)))


def _embed_target(w: Wiring, b: Builds) -> Wiring:
    d = w.drafter
    t = b.target.get_input_embeddings().weight.detach().to(d.embed_tokens.weight.dtype)
    own = d.embed_tokens.weight
    if t.shape == own.shape and torch.allclose(t, own, rtol=1e-2, atol=1e-3):
        raise NotApplicable("the drafter's embed_tokens already is the target's")
    emb = nn.Embedding.from_pretrained(t, freeze=True)
    return w.but(drafter=b.get(("embed-target", id(d)), lambda: _variant(d, embed_tokens=emb)))


def _lm_head_random(w: Wiring, b: Builds) -> Wiring:
    d = w.drafter

    def build():
        head = nn.Linear(d.lm_head.in_features, d.lm_head.out_features, bias=False)
        return _variant(d, lm_head=head.to(d.lm_head.weight.device, d.lm_head.weight.dtype))
    return w.but(drafter=b.get(("lm-head-random", id(d)), lambda: _seeded(build)))


def _flag(flag: str, value: bool):
    def apply(w: Wiring, b: Builds) -> Wiring:
        from eagle_nb.model.drafter import RMSNorm
        d = w.drafter
        if getattr(d.config, flag) == value:
            raise NotApplicable(f"{flag} is already {value} in this drafter's config")
        v = _with_config(d, **{flag: value})
        if flag == "norm_before_fc" and value:        # an engine applying a norm never trained
            p = d.fc.weight
            v.input_norm = RMSNorm(d.config.fc_in_features, d.config.rms_norm_eps).to(p.device, p.dtype)
        if flag == "norm_before_residual":
            v.midlayer = _variant(d.midlayer, norm_before_residual=value)
        return w.but(drafter=v)
    return apply


class _NoResidualLayer(nn.Module):
    """The decoder layer with its input residual missing from the output (an output norm that
    returns `hidden` instead of `hidden + residual`)."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, e, g, *args, **kwargs):
        residual = self.layer.hidden_norm(g) if self.layer.norm_before_residual else g
        return self.layer(e, g, *args, **kwargs) - residual


def _residual_bug(w: Wiring, b: Builds) -> Wiring:
    d = w.drafter
    return w.but(drafter=_variant(d, midlayer=_NoResidualLayer(d.midlayer)))


def _rope_wrong(w: Wiring, b: Builds) -> Wiring:
    d = w.drafter
    theta = 500000.0 if d.config.rope_theta != 500000.0 else 10000.0   # a Llama-3 target's value
    return w.but(drafter=_with_config(d, rope_theta=theta),
                 note=f"draft rope_theta {d.config.rope_theta:g} replaced by {theta:g}")


class _HalfLinear(nn.Module):
    """fc computed in float16 (inputs and weight cast), as an fp16 engine does: |x| > 65504
    becomes inf."""

    def __init__(self, fc: nn.Linear):
        super().__init__()
        self.inner = fc

    @property
    def weight(self):
        return self.inner.weight

    def forward(self, x):
        return nn.functional.linear(x.half(), self.inner.weight.half()).to(x.dtype)


def _fp16_fc(w: Wiring, b: Builds) -> Wiring:
    d = w.drafter
    return w.but(drafter=_variant(d, fc=_HalfLinear(d.fc)))


# A chat template the drafter never saw in training (its training data were raw text).
CHAT_TEMPLATE = "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"


def _chat_template(w: Wiring, b: Builds) -> Wiring:
    return w.but(prompt_format=CHAT_TEMPLATE)


# -- the registry, in application order ------------------------------------------------------------
FAULTS: tuple[Fault, ...] = (
    Fault("layers0-keys-dropped",
          "a speculators checkpoint (`layers.0.*`) loaded by a `midlayer.*` engine-style "
          "non-strict loader (SGLang <= 0.5.11; 0.5.12+ loads `layers.0.*`): the decoder layer "
          "stays random",
          "docs/formats.md (format C keys; how the engines load them)",
          "drafter, d2t",
          _engine_drafter, fix="load with a strict key map (`eagle-nb convert`): `layers.0.*` "
          "<-> `midlayer.*`"),
    Fault("embed-random",
          "the exported checkpoint carries a random (untrained) embed_tokens; vLLM uses it, "
          "SGLang replaces it with the target's",
          "docs/faults.md (lightseekorg/TorchSpec #38)", "drafter", _embed_random,
          fix="drop embed_tokens from the checkpoint (engines then take the target's)"),
    Fault("embed-target-forced",
          "the engine overwrites the drafter's own trained embed_tokens with the target's",
          "docs/faults.md (vllm PR #27732/#27737 -> #28549)", "drafter", _embed_target,
          fix="use an engine that shares the target embedding only when the draft has none "
              "(vLLM >= PR #28549)"),
    Fault("lm-head-missing",
          "the checkpoint has no lm_head; the engine leaves it at random init without a message",
          "docs/faults.md (sglang PR #27908, #27829)", "drafter", _lm_head_random,
          fix="ship the trained lm_head (or the target head's rows selected by t2d)"),
    Fault("norm-before-fc-dropped",
          "the config's norm_before_fc is not propagated, so the input RMSNorm before fc is skipped",
          "docs/faults.md (vllm PR #38111)", "drafter", _flag("norm_before_fc", False),
          fix="serve with an engine that honours norm_before_fc (vLLM >= PR #38111)"),
    Fault("norm-before-fc-forced",
          "an RMSNorm the drafter was never trained with is applied before fc (flag set by a "
          "converter that OR-s variant flags)",
          "docs/drafter.md (speculators converter OR-s norm_before_fc)", "drafter",
          _flag("norm_before_fc", True), fix="set norm_before_fc to what the trainer used"),
    Fault("norm-output-dropped",
          "the drafter was trained to feed the post-norm state back (norm_output) but the engine "
          "feeds the pre-norm state",
          "docs/faults.md (speculators PR #610 -> vllm PR #46488)", "drafter",
          _flag("norm_output", False), fix="serve with an engine that honours norm_output"),
    Fault("norm-output-forced",
          "the engine feeds the post-norm state back across draft steps while training fed the "
          "pre-norm state (SpecForge's norm_output means something else)",
          "docs/drafter.md (SpecForge norm_output vs vLLM/SGLang)", "drafter",
          _flag("norm_output", True), fix="drop norm_output from the serving config"),
    Fault("norm-before-residual-forced",
          "vLLM's speculators adapter fills a missing norm_before_residual with True, so the "
          "residual carries hidden_norm(g) instead of g",
          "docs/drafter.md (vLLM algos.py update_eagle3 default True)", "drafter",
          _flag("norm_before_residual", True),
          fix="write norm_before_residual: false explicitly in the speculators config"),
    Fault("output-norm-residual",
          "the draft layer's output misses its residual (an output norm returning hidden instead "
          "of hidden + residual)",
          "docs/faults.md (vllm PR #14464, #11672)", "drafter", _residual_bug,
          fix="upgrade the engine (the fused output norm must return hidden + residual)"),
    Fault("rope-theta-wrong",
          "the draft config's RoPE theta is not the one the drafter was trained with (e.g. copied "
          "from a Llama-3 target: 500000 instead of 10000)",
          "docs/drafter.md (use the draft config's RoPE base, not the target's)", "drafter",
          _rope_wrong, fix="restore the drafter's training rope_theta / rope_scaling in its config"),
    Fault("fp16-fc-overflow",
          "fc runs in float16: fused aux states (massive activations in large targets) overflow "
          "65504 and become inf",
          "docs/formats.md (engines cast draft weights to their dtype)", "drafter", _fp16_fc,
          fix="serve the drafter in bf16 (or fp32)"),
    Fault("d2t-absolute",
          "d2t offsets used as absolute target ids (equivalently: 'fixed' by subtracting "
          "arange), so draft id i becomes target id d2t[i]",
          "docs/formats.md (verl-SpeCo PR #67)", "d2t",
          _d2t_absolute, fix="store d2t as offsets: target id = i + d2t[i]"),
    Fault("d2t-identity",
          "the loader does not recognise d2t, so draft id i is taken as target id i",
          "docs/faults.md (vllm PR #18909)", "d2t", _d2t_identity,
          fix="upgrade the engine so draft_id_to_target_id is loaded (vLLM PR #18909)"),
    Fault("d2t-side-file",
          "d2t/t2d were saved in a side file, not in the weights, so the engine uses the identity",
          "docs/faults.md (NVIDIA-NeMo/Automodel PR #2447)", "d2t", _d2t_identity,
          fix="put d2t and t2d inside the weights file"),
    Fault("wrapper-capture",
          "the target is a multimodal wrapper; capture code that looks for `model.layers` "
          "finds nothing and the final hidden state is handed over",
          "docs/faults.md (sglang PR #13904: VL wrapper lost aux states)",
          "target, features, fc_policy", _wrapper,
          fix="serve with an engine whose class for this architecture passes the aux states"),
    Fault("fc-bypass",
          "the target hands over its single final (post-norm) hidden state instead of the three "
          "aux layers; the engine's width check then skips fc (SGLang PR #13904)",
          "docs/drafter.md (sglang PR #13904)", "features, fc_policy",
          _final_hidden, fix="make the target hand over its aux hidden states (engine/model "
                             "support for EAGLE-3 capture)"),
    Fault("layer-ids+1",
          "aux layer ids shifted one boundary later (output-of-layer ids read as HF ids)",
          "docs/layers.md (sglang PR #25454, vllm PR #43671)",
          "layer_ids", _shift(1), fix="write the ids in the convention the engine reads (docs/layers.md)"),
    Fault("layer-ids-1",
          "aux layer ids shifted one boundary earlier (HF ids read as output-of-layer ids)",
          "docs/layers.md (vllm PR #43671)", "layer_ids", _shift(-1),
          fix="write the ids in the convention the engine reads (docs/layers.md)"),
    Fault("chat-template-mismatch",
          "prompts are served in a chat template the drafter never saw in training (trained on "
          "raw text, served as ChatML), so its features and tokens are out of distribution",
          "docs/formats.md (d2t/t2d and the training targets come from the training "
          "data's formatted assistant tokens)", "prompt_format",
          _chat_template, fix="train (or regenerate data) with the serving chat template"),
    Fault("layer-ids-heuristic",
          "a converter ignores the config's ids and falls back to the EAGLE default {2, L//2, L-3}",
          "docs/faults.md (ggml-org/llama.cpp PR #27040)", "layer_ids", _heuristic_ids,
          fix="carry the config's aux ids through the converter"),
)
BY_NAME = {f.name: f for f in FAULTS}
ORDER = {f.name: i for i, f in enumerate(FAULTS)}
STORIES = {f.name: f.story for f in FAULTS}

# The faults notebook 03 precomputes (fault x depth); the rest of the catalogue is measured by
# catalogue.py and diagnosed by doctor.py.
PANEL = ("layers0-keys-dropped", "d2t-absolute", "wrapper-capture", "fc-bypass", "layer-ids+1",
         "layer-ids-1")
# The switches a panel offers as checkboxes, and the layer-id shift as its own control.
TOGGLES = ("layers0-keys-dropped", "d2t-absolute", "wrapper-capture", "fc-bypass")
SHIFTS = {-1: "layer-ids-1", 0: None, 1: "layer-ids+1"}
HEALTHY = "healthy"


def check(names) -> tuple[str, ...]:
    """Validated fault names in application (registry) order; unknown or repeated names fail."""
    names = tuple(names or ())
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {[f.name for f in FAULTS]}")
    if len(set(names)) != len(names):
        raise ValueError(f"fault listed twice in {list(names)}")
    return tuple(sorted(names, key=ORDER.__getitem__))


def ablations_for(faults=(), layer_shift: int = 0) -> tuple[str, ...]:
    """The fault names for a set of toggled faults and a captured-layer-id shift, in order."""
    if layer_shift not in SHIFTS:
        raise ValueError(f"layer_shift must be one of {sorted(SHIFTS)}, got {layer_shift}")
    return check(tuple(faults) + ((SHIFTS[layer_shift],) if SHIFTS[layer_shift] else ()))


def label(names) -> str:
    return " + ".join(names) if names else HEALTHY


def apply(wiring: Wiring, names, builds: Builds) -> Wiring:
    """The wiring with the named faults applied in registry order, each noted with its story."""
    for name in check(names):
        wiring = BY_NAME[name].apply(wiring, builds).but(note=f"{name}: {BY_NAME[name].story}")
    return wiring
