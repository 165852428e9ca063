"""Scoped hidden-state capture on stock Hugging Face decoders: what EAGLE-3 feeds its `fc`.

A layer id here is always the **HF `hidden_states` index**: id k is the residual stream entering
decoder layer k (0 = embedding output), and id L (L = number of decoder layers) is the output of the
last layer *before* the final norm. HF's own `hidden_states[L]` is post-norm and is never used.
`to_hf` / `from_hf` translate the ids of the other conventions (docs/layers.md).

This module knows nothing about drafters or speculation: it finds the decoder layer list the way
the model describes itself (text config's layer count, `get_decoder()`, the module tree), hangs
forward hooks on it, and hands back tensors.

NOTE: hooks are GLOBAL state on the model object. `capture` removes every hook it registered on
every exit path (normal exit and exceptions), but while the block runs, *any* forward of that model,
from any caller, is recorded.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
from torch import nn

from eagle_nb.model.decoder import find_decoder_layers
from eagle_nb.model.layers import check_layer_ids, from_hf
from eagle_nb.model.limits import context_guard


def _as_tensor(x, where: str) -> torch.Tensor:
    # Current transformers returns a tensor from a decoder layer, older versions a tuple whose
    # first element is the hidden state. NOTE: `output[0]` on a *tensor* silently takes batch row 0.
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)) and x and isinstance(x[0], torch.Tensor):
        return x[0]
    raise TypeError(f"{where}: expected a tensor or a tuple starting with one, got {type(x).__name__}")


@dataclass
class CapturedStates:
    """Captured residual-stream states keyed by HF layer id (the most recent forward), plus
    every forward's states when `keep_history` was set."""
    layer_ids: list[int]
    num_layers: int
    layers_path: str
    model_class: str
    states: dict[int, torch.Tensor] = field(default_factory=dict)
    history: dict[int, list[torch.Tensor]] = field(default_factory=dict)

    def __getitem__(self, k: int) -> torch.Tensor:
        if k not in self.layer_ids:
            raise KeyError(f"layer {k} was not captured (captured: {self.layer_ids})")
        if k not in self.states:
            raise KeyError(f"layer {k} was hooked but no forward ran through it inside the block")
        return self.states[k]

    def __len__(self) -> int:
        return len(self.states)

    def key(self, k: int) -> str:
        """Stable name of layer id k: the input of layer k, or the last layer's output."""
        return f"layers.{k}.input" if k < self.num_layers else f"layers.{k - 1}.output"

    def fused(self, expected_width: int | None = None) -> torch.Tensor:
        """The EAGLE-3 input: states concatenated in ascending layer order, (B, T, n*H)."""
        missing = [k for k in self.layer_ids if k not in self.states]
        if missing:
            raise ValueError(f"layers {missing} were requested but never captured in "
                             f"{self.model_class} ({self.layers_path}); refusing to fuse fewer states")
        out = torch.cat([self.states[k] for k in self.layer_ids], dim=-1)
        if expected_width is not None and out.shape[-1] != expected_width:
            raise ValueError(f"fused width {out.shape[-1]} (layers {self.layer_ids}) != "
                             f"{expected_width} expected by the drafter")
        return out

    def table(self, conventions=("hf", "sglang-config")):
        """One row per captured layer plus the fused row: ids per convention, shape, dtype,
        mean/max per-token L2 norm, fraction NaN/inf. A pandas DataFrame."""
        import pandas as pd
        rows = []
        for k in self.layer_ids:
            row = {"name": self.key(k), **{f"id_{c}": from_hf([k], c)[0] for c in conventions}}
            rows.append({**row, **_stats(self[k])})
        if self.layer_ids:
            # "—", not None: a None would turn the id columns into floats (2.0, NaN)
            rows.append({"name": "fused", **{f"id_{c}": "—" for c in conventions},
                         **_stats(self.fused())})
        return pd.DataFrame(rows)


@contextlib.contextmanager
def capture(model: nn.Module, layer_ids, *, layers_path: str | None = None,
            keep_history: bool = False, dtype: torch.dtype | None = None,
            device: torch.device | str | None = None):
    """Record the residual stream at the given HF layer ids while the block runs.

        with capture(model, eagle3_layers(L)) as states:
            model(input_ids)
        states[2]            # (B, T, H), input of decoder layer 2
        states.fused()       # (B, T, 3H)

    Id k < L hooks the *input* of layer k (forward pre-hook); id L hooks the *output* of layer L-1
    (pre final norm). Tensors are detached and optionally moved to `dtype`/`device`. An input that
    reaches past the target's `max_position_embeddings` is captured with a ContextWarning.

    NOTE: hooks are global state on `model`; all are removed when the block exits, exceptions
    included. Every forward of the model inside the block overwrites `states[k]`.
    """
    path, layers = find_decoder_layers(model, layers_path)
    L = len(layers)
    ids = check_layer_ids(layer_ids, L)
    store = CapturedStates(ids, L, path, type(model).__name__)

    def record(k: int, x: torch.Tensor) -> None:
        x = x.detach()
        if dtype is not None or device is not None:
            x = x.to(device=device or x.device, dtype=dtype or x.dtype)
        store.states[k] = x
        if keep_history:
            store.history.setdefault(k, []).append(x)

    guard = context_guard(model) or (lambda *a: None)   # past the context: say so, once

    def pre_hook(k):
        def fn(module, args, kwargs):
            guard(module, args, kwargs)
            hs = args[0] if args else kwargs.get("hidden_states")
            record(k, _as_tensor(hs, f"{path}.{k} input"))
        return fn

    def post_hook(k):
        def fn(module, args, kwargs, output):
            guard(module, args, kwargs)
            record(k, _as_tensor(output, f"{path}.{k - 1} output"))
        return fn

    def not_empty(module, args, kwargs):
        hs = args[0] if args else kwargs.get("hidden_states")
        if isinstance(hs, torch.Tensor) and hs.numel() == 0:     # else torch fails deep inside the first attention, on a reshape
            raise ValueError(f"capture: {store.model_class} was run on an empty input (hidden "
                             f"states {tuple(hs.shape)} entering {path}.0): there is nothing to "
                             f"capture; give at least one token")

    handles = [layers[0].register_forward_pre_hook(not_empty, with_kwargs=True)]
    try:
        for k in ids:
            if k < L:
                handles.append(layers[k].register_forward_pre_hook(pre_hook(k), with_kwargs=True))
            else:
                handles.append(layers[L - 1].register_forward_hook(post_hook(k), with_kwargs=True))
        yield store
    finally:
        for h in handles:
            h.remove()


def _stats(x: torch.Tensor) -> dict:
    """Shape, dtype, mean/max per-token L2 norm and fraction NaN/inf of one state (B, T, H): the
    one place the per-token norm is computed."""
    f = x.float()
    norms = f.norm(dim=-1)                                              # (B, T)
    return {"shape": tuple(x.shape), "dtype": str(x.dtype).replace("torch.", ""),
            "mean_norm": float(norms.mean()), "max_norm": float(norms.max()),
            "frac_nonfinite": float((~torch.isfinite(f)).float().mean())}


def norm_profile(states: CapturedStates) -> list[tuple[int, float, float]]:
    """(layer id, mean, max per-token L2 norm) of every captured layer, for plots and the CLI."""
    return [(k, s["mean_norm"], s["max_norm"]) for k, s in
            ((k, _stats(states[k])) for k in states.layer_ids)]
