"""How each fault of the registry (faults.py) is produced: the switchable faults' transformations
`(Wiring, Builds) -> Wiring`, and the crash-only faults' error texts for a pair's shapes.

A transformation is pure: it returns `w.but(...)` with the fields it changes and never mutates a
module; a drafter fault hands over `drafter.variant(...)`, which shares every weight. One that
cannot happen on this pair raises `NotApplicable`. Costly objects come from `Builds` (memoised).

A crash text is what the engine prints. Where torch itself produces the message (a width mismatch
inside `fc`, a vocabulary-size mismatch), the same torch operation runs on tensors of the pair's
shapes and torch's own message is returned, so the text is torch's, not ours.

Knows the drafter and capture APIs and the checkpoint loaders; runs no speculation. Imports torch
only when a fault is applied (the registry, and with it the CLI's check of fault names, loads
without it); the torch modules that stand in for a broken part are in fault_modules.py.
"""
from __future__ import annotations

from dataclasses import replace

from eagle_nb.experiment.wiring import Builds, NeedsTarget, NotApplicable, Wiring
from eagle_nb.model.config import FC_ENGINE_WIDTH_CHECK, FEATURES_FINAL
from eagle_nb.model.fault_names import EMBED_RANDOM, EMBED_TARGET_FORCED, LAYERS0_KEYS_DROPPED, WRAPPER_CAPTURE


# -- switchable faults: loader and target side ------------------------------------------------------
def engine_drafter(w: Wiring, b: Builds) -> Wiring:
    if b.speculators_path is None:
        raise ValueError(f"{LAYERS0_KEYS_DROPPED} needs a speculators-format checkpoint path")

    def build():
        from eagle_nb.checkpoints.load import load_drafter_engine_style
        d, info = load_drafter_engine_style(b.speculators_path, b.target)
        return d.to(b.drafter.fc.weight.device, b.drafter.fc.weight.dtype), info

    d, info = b.get("engine-style-drafter", build)
    return w.but(drafter=d, d2t=None,
                 note=f"engine-style load dropped {len(info['dropped'])} keys and left "
                      f"{len(info['left_random'])} parameters at random init")


def d2t_absolute(w: Wiring, b: Builds) -> Wiring:
    import torch
    d2t = w.d2t_in_use()
    return w.but(d2t=d2t - torch.arange(d2t.numel(), device=d2t.device))


def d2t_identity(w: Wiring, b: Builds) -> Wiring:
    import torch
    return w.but(d2t=torch.zeros_like(w.d2t_in_use()))


def final_hidden(w: Wiring, b: Builds) -> Wiring:
    return w.but(features=FEATURES_FINAL, fc_policy=FC_ENGINE_WIDTH_CHECK)


def wrapper(w: Wiring, b: Builds) -> Wiring:
    from torch import nn

    from eagle_nb.model.decoder import engine_style_layers
    from eagle_nb.model.targets import make_wrapper
    if not isinstance(b.target, nn.Module):
        raise NeedsTarget(f"{WRAPPER_CAPTURE} rebuilds the target inside a multimodal wrapper: it needs "
                          "the loaded target, not a recording")
    wrapped = b.get("wrapper", lambda: make_wrapper(b.target))
    w = w.but(target=wrapped)
    if engine_style_layers(wrapped) is None:        # what the engine's capture code sees
        w = final_hidden(w, b).but(
            note=f"engine-style capture found no `model.layers` on {type(wrapped).__name__}: "
                 "final hidden state handed over")
    return w


def shift(by: int):
    def apply(w: Wiring, b: Builds) -> Wiring:
        return w.but(layer_ids=tuple(i + by for i in w.layer_ids))
    return apply


def heuristic_ids(w: Wiring, b: Builds) -> Wiring:
    from eagle_nb.model.decoder import num_decoder_layers
    from eagle_nb.model.layers import eagle3_layers
    ids = tuple(eagle3_layers(b.num_layers if b.num_layers is not None else num_decoder_layers(b.target)))
    if ids == tuple(w.layer_ids):
        raise NotApplicable(f"the drafter's ids {list(w.layer_ids)} already are the heuristic's")
    return w.but(layer_ids=ids)


# -- switchable faults: the drafter ----------------------------------------------------------------
def with_config(d, **changes):
    """The drafter with its config fields changed (RoPE table rebuilt when RoPE changes)."""
    from eagle_nb.model.drafter import rope_inv_freq
    cfg = replace(d.config, **changes)
    if "rope_theta" in changes or "rope_scaling" in changes:
        return d.variant(config=cfg, inv_freq=rope_inv_freq(cfg).to(d.inv_freq.device))
    return d.variant(config=cfg)


def seeded(build, seed: int = 0):
    import torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def embed_random(w: Wiring, b: Builds) -> Wiring:
    from torch import nn
    d = w.drafter

    def build():
        e = d.embed_tokens.weight
        std = float(e.detach().float().std())
        emb = nn.Embedding(*e.shape).to(e.device, e.dtype)
        nn.init.normal_(emb.weight, std=std)            # same scale, no relation to the target
        return d.variant(embed_tokens=emb)
    return w.but(drafter=b.get((EMBED_RANDOM, id(d)), lambda: seeded(build)))


def embed_target(w: Wiring, b: Builds) -> Wiring:
    import torch
    from torch import nn

    from eagle_nb.checkpoints.load import EMBED, target_embedding
    d = w.drafter
    t = target_embedding(b.target)[1].get(EMBED)   # a loaded model's, or read lazily from its directory
    if t is None:
        raise NeedsTarget(f"{EMBED_TARGET_FORCED} needs the target's embedding: give the target's directory")
    t = t.detach().to(d.embed_tokens.weight.device, d.embed_tokens.weight.dtype)
    own = d.embed_tokens.weight
    if t.shape == own.shape and torch.allclose(t, own, rtol=1e-2, atol=1e-3):
        raise NotApplicable("the drafter's embed_tokens already is the target's")
    emb = nn.Embedding.from_pretrained(t, freeze=True)
    return w.but(drafter=b.get(("embed-target", id(d)), lambda: d.variant(embed_tokens=emb)))


def lm_head_random(w: Wiring, b: Builds) -> Wiring:
    from torch import nn
    d = w.drafter

    def build():
        head = nn.Linear(d.lm_head.in_features, d.lm_head.out_features, bias=False)
        return d.variant(lm_head=head.to(d.lm_head.weight.device, d.lm_head.weight.dtype))
    return w.but(drafter=b.get(("lm-head-random", id(d)), lambda: seeded(build)))


def flag(name: str, value: bool):
    def apply(w: Wiring, b: Builds) -> Wiring:
        from eagle_nb.model.drafter import RMSNorm, variant
        d = w.drafter
        if getattr(d.config, name) == value:
            raise NotApplicable(f"{name} is already {value} in this drafter's config")
        v = with_config(d, **{name: value})
        if name == "norm_before_fc" and value:        # an engine applying a norm never trained
            p = d.fc.weight
            v.input_norm = RMSNorm(d.config.fc_in_features, d.config.rms_norm_eps).to(p.device, p.dtype)
        if name == "norm_before_residual":
            v.midlayer = variant(d.midlayer, norm_before_residual=value)
        return w.but(drafter=v)
    return apply


def residual_bug(w: Wiring, b: Builds) -> Wiring:
    from eagle_nb.experiment.fault_modules import NoResidualLayer
    d = w.drafter
    return w.but(drafter=d.variant(midlayer=NoResidualLayer(d.midlayer)))


def rope_wrong(w: Wiring, b: Builds) -> Wiring:
    d = w.drafter
    theta = 500000.0 if d.config.rope_theta != 500000.0 else 10000.0   # a Llama-3 target's value
    return w.but(drafter=with_config(d, rope_theta=theta),
                 note=f"draft rope_theta {d.config.rope_theta:g} replaced by {theta:g}")


def fp16_fc(w: Wiring, b: Builds) -> Wiring:
    from eagle_nb.experiment.fault_modules import HalfLinear
    d = w.drafter
    return w.but(drafter=d.variant(fc=HalfLinear(d.fc)))


# -- crash-only faults: the engine's error text for a pair's shapes -----------------------------------
def torch_message(fn) -> str:
    try:
        fn()
    except RuntimeError as e:
        return str(e).splitlines()[0]
    raise AssertionError("expected torch to raise")  # pragma: no cover - shapes chosen to fail


def fc_width_text(*, tokens=7, fc_in=576, hidden=192, n_states=None, target_hidden=None, **_) -> str:
    """`n_states` captured states of width `target_hidden` meet an fc expecting `fc_in` inputs."""
    import torch
    from torch import nn
    width = (n_states if n_states is not None else 2) * (target_hidden or hidden)
    return torch_message(lambda: nn.functional.linear(torch.zeros(tokens, width),
                                                      torch.zeros(hidden, fc_in)))


def vocab_short_text(*, draft_vocab=32000, distinct_tokens=6054, **_) -> str:
    import torch
    return torch_message(lambda: torch.zeros(draft_vocab) + torch.zeros(distinct_tokens))


def no_capture_text(*, target_class="LlamaForCausalLM", **_) -> str:
    return f"AttributeError: '{target_class}' object has no attribute 'capture_aux_hidden_states'"


def fixed_text(text: str):
    """A crash whose text does not depend on the pair."""
    def message(**_) -> str:
        return text
    return message
