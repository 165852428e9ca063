"""Finding a target's decoder layers: the `nn.ModuleList` capture hooks attach to.

Text models keep them at `model.layers`; multimodal wrappers nest a language model
(`model.language_model.layers`, `language_model.model.layers`, ...). The search is by structure,
never by class name, and a wrapper whose layers cannot be told apart is an error naming the
candidates. Knows nothing about EAGLE-3 layer ids.
"""

from __future__ import annotations

from torch import nn

from eagle_nb.io.target_parts import NOT_TEXT, TEXT_CONFIG_KEYS


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


def engine_style_layers(model: nn.Module) -> nn.ModuleList | None:
    """ABLATION: how serving-engine capture code typically finds layers: only `model.layers`
    (the plain *ForCausalLM layout). Returns None on a wrapper model, where that code then hands
    over the final hidden state instead of the aux states, without an error."""
    obj = _get(model, "model.layers")
    return obj if isinstance(obj, nn.ModuleList) else None
