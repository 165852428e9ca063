"""What one-pass acceptance (onepass.py) reads from the target: each prompt's greedy continuation
and the target's states at every fed position, from a loaded target or from a recording.

From a loaded target (`from_target`): the prompts are decoded greedily together (left-padded, one
token per forward, HF cache, EOS not stopping), then one forward over each full sequence
(right-padded: causal attention never looks right, so padding needs no mask) captures the states
of every decoder layer (HF ids 0..L) and the final post-norm state, so a fault that reads other
layers, or the final state, needs no new target pass. The target's own top-2 margin at every
continuation position is kept: a margin near zero is where batched and cached numerics could pick
different tokens (`near_ties`). From a recording (`from_recording`): the recorded ids, the recorded
aux states (one fixed layer set) and the final state when recorded.

Knows capture hooks and HF forward arguments; nothing about drafters or acceptance.
"""
from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass, field

import torch

from eagle_nb.loop.chain import FEATURES_AUX, FEATURES_FINAL
from eagle_nb.model.capture import capture
from eagle_nb.model.decoder import num_decoder_layers
from eagle_nb.model.layers import check_layer_ids

FINAL = "final"          # key of the final (post-norm) state


@dataclass
class TargetStates:
    """Per prompt: ids (prompt + continuation, CPU int64), the prompt length, and target states
    (n_fed, H) keyed by HF layer id or FINAL; `fused_ids`: the ids of a pre-fused aux tensor
    (recordings store their aux layers concatenated under the key "aux")."""
    ids: list[torch.Tensor]
    prompt_lens: list[int]
    states: dict = field(default_factory=dict)          # key -> list of (n_fed_i, H) per prompt
    num_layers: int | None = None
    fused_ids: list[int] | None = None
    target_margins: list[torch.Tensor] | None = None   # (n_cont_i,) top-1 minus top-2 logit
    target_disagree: list[list[int]] = field(default_factory=list)  # positions full fwd != decode
    source: str = ""
    names: list[str] | None = None                      # record names (recordings)
    known: list[int] | None = None     # ids[b][:known[b]] are the target's, the rest padding

    def __len__(self) -> int:
        return len(self.ids)

    def features(self, mode: str, layer_ids) -> list[torch.Tensor]:
        """What the target hands the drafter, per prompt: the aux states of `layer_ids` concatenated
        in ascending order (as `CapturedStates.fused`) or the final post-norm state."""
        if mode == FEATURES_FINAL:
            if FINAL not in self.states:
                raise ValueError(f"{self.source}: no final hidden state recorded (record with final_hidden)")
            return self.states[FINAL]
        if mode != FEATURES_AUX:
            raise ValueError(f"one pass needs target features: feature_mode {mode!r} is not one of "
                             f"{(FEATURES_AUX, FEATURES_FINAL)}")
        ids = sorted(int(i) for i in layer_ids)
        if self.fused_ids is not None and ids == sorted(self.fused_ids):
            return self.states["aux"]
        if self.num_layers is not None:
            ids = check_layer_ids(ids, self.num_layers)
        if self.fused_ids is not None and set(ids) <= set(self.fused_ids):
            # a recording that kept more layers: its aux holds one H-wide block per kept id
            order = sorted(self.fused_ids)
            H = self.states["aux"][0].shape[-1] // len(order)
            return [torch.cat([a[:, order.index(i) * H:(order.index(i) + 1) * H] for i in ids], -1)
                    for a in self.states["aux"]]
        missing = [i for i in ids if i not in self.states]
        if missing:
            have = self.fused_ids if self.fused_ids is not None else sorted(
                k for k in self.states if isinstance(k, int))
            raise ValueError(f"{self.source}: states of HF layer ids {missing} were not kept "
                             f"(kept: {have}); record with every layer kept")
        return [torch.cat(parts, -1) for parts in zip(*(self.states[i] for i in ids))]

    def near_ties(self, eps: float = 1e-4) -> list[tuple[int, int, float]]:
        """(prompt, continuation index, margin) where the target's top-2 margin is under `eps`."""
        out = []
        for b, m in enumerate(self.target_margins or []):
            out += [(b, int(i), float(m[i])) for i in (m < eps).nonzero().flatten()]
        return out

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for v in self.states.values() for t in v) + \
            sum(t.numel() * t.element_size() for t in self.ids)


def _forward_kwargs(model) -> tuple[str, bool]:
    params = inspect.signature(model.forward).parameters
    return ("cache" if "cache" in params else "past_key_values"), "logits_to_keep" in params


def _new_cache(model):
    from transformers import DynamicCache
    return DynamicCache(config=model.config) if "config" in \
        inspect.signature(DynamicCache.__init__).parameters else DynamicCache()


@torch.no_grad()
def greedy_continuations(model, prompts: list[torch.Tensor], n_tokens: int,
                         batch_size: int = 16, temperature: float = 0.0, seed: int = 0) -> list[torch.Tensor]:
    """`n_tokens` greedy tokens after each (1, T0) prompt, decoded `batch_size` prompts at a time
    (left-padded, attention mask and positions as HF generate sets them). Returns (T0 + n,) ids.
    `temperature` > 0: sampled from softmax(logits / T) instead (one generator seeded `seed`,
    drawn batch by batch), never stopping at EOS: a trajectory the target sampled."""
    gen = torch.Generator().manual_seed(seed)
    dev = model.get_input_embeddings().weight.device
    cache_kw, keep = _forward_kwargs(model)
    out = []
    for s in range(0, len(prompts), batch_size):
        chunk = [p.reshape(-1).to(dev) for p in prompts[s:s + batch_size]]
        B, T0 = len(chunk), max(p.numel() for p in chunk)
        ids = torch.zeros(B, T0, dtype=torch.long, device=dev)
        mask = torch.zeros(B, T0, dtype=torch.long, device=dev)
        for b, p in enumerate(chunk):
            ids[b, T0 - p.numel():], mask[b, T0 - p.numel():] = p, 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        kw = {cache_kw: _new_cache(model), "use_cache": True, **({"logits_to_keep": 1} if keep else {})}
        x, new = ids, []
        for _ in range(n_tokens):
            logits = model(input_ids=x, attention_mask=mask, position_ids=pos, **kw).logits[:, -1]
            if temperature == 0:
                x = logits.argmax(-1)[:, None]                               # (B, 1)
            else:
                probs = (logits.float() / temperature).softmax(-1).cpu()
                x = torch.multinomial(probs, 1, generator=gen).to(dev)      # (B, 1)
            new.append(x)
            mask = torch.cat([mask, torch.ones_like(x)], 1)
            pos = pos[:, -1:] + 1
        new = torch.cat(new, 1).cpu()
        out += [torch.cat([p.cpu(), new[b]]) for b, p in enumerate(chunk)]
    return out


@torch.no_grad()
def from_target(model, prompts: list[torch.Tensor], n_tokens: int, *, layer_ids="all",
                batch_size: int = 16, device=None, check_margins: bool = True,
                temperature: float = 0.0, seed: int = 0) -> TargetStates:
    """Greedy-decode `n_tokens` after each prompt and keep the target's states at every fed
    position: HF layer ids `layer_ids` ("all": 0..L; None: none) and the final post-norm state.
    States stay on the target's device unless `device` is given. `temperature` > 0: the
    continuation is a trajectory sampled with `seed` (greedy_continuations), margins unchecked."""
    seqs = greedy_continuations(model, prompts, n_tokens, batch_size, temperature, seed)
    check_margins = check_margins and temperature == 0
    L = None
    try:
        L = num_decoder_layers(model)
    except (ValueError, AttributeError):      # no findable decoder: final state only
        layer_ids = None
    ids = list(range(L + 1)) if layer_ids == "all" else (check_layer_ids(layer_ids, L) if layer_ids else [])
    dev = model.get_input_embeddings().weight.device
    _, keep = _forward_kwargs(model)
    st = TargetStates(seqs, [int(p.numel()) for p in prompts], {i: [] for i in ids}, L,
                      source=f"{type(model).__name__} " + ("greedy decoding" if temperature == 0 else
                                                             f"sampling at T={temperature:g}, seed {seed}")
                      + f" ({len(seqs)} prompts)")
    st.states[FINAL], st.target_margins = [], [] if check_margins else None
    head = model.get_output_embeddings() if check_margins else None
    for s in range(0, len(seqs), batch_size):
        chunk = seqs[s:s + batch_size]
        lens = [c.numel() - 1 for c in chunk]                       # the last token is never fed
        x = torch.zeros(len(chunk), max(lens), dtype=torch.long, device=dev)
        for b, c in enumerate(chunk):
            x[b, :lens[b]] = c[:-1].to(dev)
        with capture(model, ids, device=device) if ids else contextlib.nullcontext() as cap:
            out = model(input_ids=x, output_hidden_states=True, use_cache=False,
                        **({"logits_to_keep": 1} if keep else {}))
        final = out.hidden_states[-1]
        for b, n in enumerate(lens):
            for i in ids:
                st.states[i].append(cap.states[i][b, :n].clone())
            st.states[FINAL].append(final[b, :n].to(device or final.device).clone())
            if head is not None:
                _check(st, head, final[b, :n], chunk[b], st.prompt_lens[s + b])
    return st


def _check(st: TargetStates, head, final: torch.Tensor, seq: torch.Tensor, T0: int, rows: int = 512):
    """The target's top-2 margin at each continuation position and where the full forward's
    argmax differs from the decoded token (a near-tie), from the final state and the head."""
    margins, disagree = [], []
    for a in range(T0 - 1, final.shape[0], rows):
        top = head(final[a:a + rows]).float().topk(2, -1)
        margins.append((top.values[:, 0] - top.values[:, 1]).cpu())
        want = seq[a + 1:a + 1 + top.indices.shape[0]].to(top.indices.device)
        disagree += [a + int(i) - T0 + 1 for i in (top.indices[:, 0] != want).nonzero().flatten()]
    st.target_margins.append(torch.cat(margins))
    st.target_disagree.append(disagree)


def from_recording(recording, records=None) -> TargetStates:
    """The records of a `Recording` (our format or a trainer's files), read into memory: all of
    them, or the already read `records` of it (a subset, in the caller's order)."""
    recs = list(recording) if records is None else list(records)
    st = TargetStates([r.input_ids for r in recs], [r.prompt_len for r in recs],
                      {"aux": [r.aux for r in recs]}, recording.meta.get("num_layers"),
                      fused_ids=recording.layer_ids, source=str(recording.path))
    if all(r.final is not None for r in recs):
        st.states[FINAL] = [r.final for r in recs]
    st.names = [r.name for r in recs]
    return st
