"""Scoped hidden-state capture on stock Hugging Face decoders: what EAGLE-3 feeds its `fc`.

A layer id here is always the **HF `hidden_states` index**: id k is the residual stream entering
decoder layer k (0 = embedding output), and id L (L = number of decoder layers) is the output of the
last layer *before* the final norm. HF's own `hidden_states[L]` is post-norm and is never used.
`to_hf` / `from_hf` translate the ids of the other conventions (reference/eagle3.md §4).

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

from .target_parts import NOT_TEXT, TEXT_CONFIG_KEYS

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
    id is 1 (reference/eagle3.md §4, §10)."""
    ids = [int(i) for i in config_ids]
    since = sglang_version_tuple(version) >= SGLANG_FIRST_ID_RULE_SINCE
    first_id_rule = since and architecture in SGLANG_FIRST_ID_RULE_ARCHS
    if not first_id_rule or (ids and ids[0] == 1):
        return [i + 1 for i in ids]
    return ids


def _get(model: nn.Module, path: str):
    obj = model
    for part in path.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def text_layer_count(model: nn.Module) -> int | None:
    """The text decoder's layer count as the model's config states it (the text sub-config of a
    multimodal wrapper), or None when the model carries no such config."""
    cfg = getattr(model, "config", None)
    if cfg is None:
        return None
    subs = [cfg]
    try:
        subs.insert(0, cfg.get_text_config(decoder=True))
    except (AttributeError, ValueError):   # no HF config, or several text configs: look by name
        pass
    subs += [getattr(cfg, k) for k in TEXT_CONFIG_KEYS if getattr(cfg, k, None) is not None]
    for c in subs:
        n = getattr(c, "num_hidden_layers", None)
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n
    return None


def _own_decoder(model: nn.Module) -> nn.Module | None:
    """transformers' own `get_decoder()` (a wrapper's language model), when it has one."""
    fn = getattr(model, "get_decoder", None)
    if not callable(fn):
        return None
    try:
        dec = fn()
    except Exception:  # noqa: BLE001 - some classes raise for "no decoder": then search the tree
        return None
    return dec if isinstance(dec, nn.Module) else None


def _best(model: nn.Module, cands: list[tuple[str, nn.ModuleList]]) -> list[tuple[str, nn.ModuleList]]:
    """Lists whose owner also holds a token embedding (a text decoder: `embed_tokens` + `layers`,
    `wte` + `h`; vision towers keep their patch embeddings one level down) if any, else all; then
    the outermost of those."""
    def owns_embedding(name: str) -> bool:
        owner = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        return any(isinstance(c, nn.Embedding) for c in owner.children())
    cands = [c for c in cands if owns_embedding(c[0])] or cands
    if not cands:
        return []
    depth = min(n.count(".") for n, _ in cands)
    return [(n, m) for n, m in cands if n.count(".") == depth]


def find_decoder_layers(model: nn.Module, layers_path: str | None = None) -> tuple[str, nn.ModuleList]:
    """Return (path, ModuleList) of the text decoder layers, found the way the model describes
    itself: the ModuleList whose length is its text config's `num_hidden_layers`, looked for first
    inside `get_decoder()` (a wrapper's language model), then anywhere outside vision/audio towers;
    a list next to a token embedding, then the outermost list, wins. `layers_path` overrides the search. Raises naming what was found when nothing fits or
    several lists fit equally."""
    lists = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) > 0]
    found = [f"{n} ({len(m)})" for n, m in lists][:16]
    if layers_path:
        obj = _get(model, layers_path)
        if isinstance(obj, nn.ModuleList) and len(obj) > 0:
            return layers_path, obj
        raise ValueError(f"layers_path={layers_path!r} of {type(model).__name__} is "
                         f"{type(obj).__name__ if obj is not None else 'missing'}, not a non-empty "
                         f"ModuleList; ModuleLists (length) in this model: {found}")
    L = text_layer_count(model)
    names = {id(m): n for n, m in model.named_modules()}
    decoder = _own_decoder(model)
    prefix = names.get(id(decoder)) if decoder is not None else None
    scopes = ([] if prefix is None else [prefix]) + [""]
    fit = [(n, m) for n, m in lists if L is None or len(m) == L]
    for scope in scopes:   # the model's own decoder first; then the tree, minus vision/audio towers
        within = _best(model, [(n, m) for n, m in fit if n.startswith(scope + ".") or
                              (not scope and not any(t in n.lower() for t in NOT_TEXT))])
        if len(within) == 1:
            return within[0]
        if len(within) > 1:
            raise ValueError(
                f"cannot tell the decoder layers of {type(model).__name__}: "
                f"{[n for n, _ in within]} all {'have ' + str(L) + ' entries' if L else 'fit'}"
                f"{' under get_decoder() = ' + repr(scope) if scope else ''}. "
                f"Pass layers_path='...' explicitly.")
    where = f"get_decoder() = {prefix!r}" if prefix else "no get_decoder()"
    count = f"num_hidden_layers = {L} (text config)" if L else "no layer count in a config"
    raise ValueError(
        f"cannot find the decoder layers of {type(model).__name__}: {count}, {where}, and no "
        f"ModuleList fits; ModuleLists (length) in this model: {found}. "
        f"Pass layers_path='...' explicitly.")


def num_decoder_layers(model: nn.Module, layers_path: str | None = None) -> int:
    return len(find_decoder_layers(model, layers_path)[1])


def _as_tensor(x, where: str) -> torch.Tensor:
    # Current transformers returns a tensor from a decoder layer, older versions a tuple whose
    # first element is the hidden state. NOTE: `output[0]` on a *tensor* silently takes batch row 0.
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, (tuple, list)) and x and isinstance(x[0], torch.Tensor):
        return x[0]
    raise TypeError(f"{where}: expected a tensor or a tuple starting with one, got {type(x).__name__}")


def check_layer_ids(ids, num_layers: int) -> list[int]:
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
    (pre final norm). Tensors are detached and optionally moved to `dtype`/`device`.

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

    def pre_hook(k):
        def fn(module, args, kwargs):
            hs = args[0] if args else kwargs.get("hidden_states")
            record(k, _as_tensor(hs, f"{path}.{k} input"))
        return fn

    def post_hook(k):
        def fn(module, args, kwargs, output):
            record(k, _as_tensor(output, f"{path}.{k - 1} output"))
        return fn

    handles = []
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


def engine_style_layers(model: nn.Module) -> nn.ModuleList | None:
    """ABLATION: how serving-engine capture code typically finds layers: only `model.layers`
    (the plain *ForCausalLM layout). Returns None on a wrapper model, where that code then hands
    over the final hidden state instead of the aux states, without an error."""
    obj = _get(model, "model.layers")
    return obj if isinstance(obj, nn.ModuleList) else None
