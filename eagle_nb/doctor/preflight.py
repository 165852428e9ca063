"""Before any run: can the target run here, and which phases will the doctor do?

Decided in well under a second from files only: the target's `config.json` read as data (its text
config, architecture and parameter count), the weight index or headers (are the decoder layers
here, or only the embedding and head?), the memory this machine has free for them, the tokenizer
files, and whether loading the target would run the checkpoint's own code (`auto_map`), which
happens only when the user passes `--trust-remote-code`. No model is built, no tokenizer loaded,
nothing of the checkpoint executed; a target that cannot run is said so up front, with the reasons,
and the doctor works from the files, the observation and the catalogue instead.

Knows files and configs; nothing about drafters or faults.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from eagle_nb.model.architectures import Architecture, lookup, remote_code_reason

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "vocab.json")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
SINGLES = ("model.safetensors", "pytorch_model.bin")
MEMORY_HEADROOM = 0.9          # use at most this share of the free memory for the weights
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass
class Preflight:
    target: str
    can_run: bool
    reasons: list[str] = field(default_factory=list)   # why it cannot run here (empty: it can)
    facts: list[str] = field(default_factory=list)     # what was found, one line each
    architecture: Architecture | None = None
    config: dict = field(default_factory=dict)          # raw config.json


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def _count(n: float) -> str:
    """A parameter count as people write it: 4.7M, 134.5M, 1,026.4B (not 0.0B for a small model)."""
    return f"{n / 1e9:,.1f}B" if n >= 1e9 else f"{n / 1e6:,.1f}M"


def estimate_params(c: dict) -> int:
    """Parameters of a decoder from its text config: attention (MLA when `kv_lora_rank` is set),
    dense or MoE MLPs, embedding and head. An estimate (biases, norms and routers left out)."""
    H, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    nh = c.get("num_attention_heads") or 1
    kv = c.get("num_key_value_heads") or nh
    hd = c.get("head_dim") or H // nh
    if c.get("kv_lora_rank"):                     # DeepSeek-V2/V3 multi-head latent attention
        q, r = c.get("q_lora_rank") or 0, c["kv_lora_rank"]
        qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
        attn = ((H * q + q * nh * qk) if q else H * nh * qk) + H * (r + c["qk_rope_head_dim"]) \
            + r * nh * (c["qk_nope_head_dim"] + c["v_head_dim"]) + nh * c["v_head_dim"] * H
    else:
        attn = H * nh * hd * 2 + 2 * H * kv * hd
    experts = c.get("n_routed_experts") or c.get("num_local_experts") or c.get("num_experts") or 0
    dense = 3 * H * c["intermediate_size"]
    if experts:
        moe_i = c.get("moe_intermediate_size") or c["intermediate_size"]
        n_dense = c.get("first_k_dense_replace", 0)
        moe = (experts + (c.get("n_shared_experts") or 0)) * 3 * H * moe_i
        mlp = n_dense * dense + (L - n_dense) * moe
    else:
        mlp = L * dense
    tied = c.get("tie_word_embeddings") is True
    return L * attn + mlp + V * H * (1 if tied else 2)


def free_memory() -> tuple[int, str]:
    """(bytes, where): free GPU memory when CUDA is here, else the RAM Linux reports available."""
    import torch
    if torch.cuda.is_available():
        return int(torch.cuda.mem_get_info()[0]), "free on the GPU"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "RAM available"
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "RAM free"


def listed_weights(path: Path) -> tuple[list[str], list[str], str]:
    """(tensor names listed, listed files missing here, where the list came from)."""
    for index in INDEXES:
        if (path / index).is_file():
            wm = json.loads((path / index).read_text()).get("weight_map") or {}
            missing = sorted({f for f in wm.values() if not (path / f).exists()})
            return list(wm), missing, index
    for single in SINGLES:
        if (path / single).is_file():
            if single.endswith(".safetensors"):
                from safetensors import safe_open
                with safe_open(str(path / single), "pt") as f:
                    return list(f.keys()), [], single
            import torch
            keys = torch.load(path / single, map_location="cpu", weights_only=True, mmap=True)
            return list(keys), [], single
    return [], [], "no weight files"


def _weights(path: Path, L: int) -> tuple[bool, str]:
    keys, missing, where = listed_weights(path)
    layers = {int(m.group(1)) for k in keys if not re.search(r"vision|visual|audio", k)
              for m in [re.search(r"layers\.(\d+)\.", k)] if m}
    here = len(layers & set(range(L)))
    fact = f"{where}: {len(keys)} tensors, decoder layers {here} of {L}"
    if missing:
        fact += f"; {len(missing)} listed shard file(s) missing here (e.g. {missing[0]})"
    elif keys and not here:
        fact += " (embedding and head only)"
    return bool(keys) and not missing and here == L, fact


def _tokenizer(path: Path) -> tuple[bool, str | None]:
    """(tokenizer files present, why loading it would run the checkpoint's code or None)."""
    present = [f for f in TOKENIZER_FILES if (path / f).is_file()] + [p.name for p in path.glob("*.tiktoken")]
    remote = None
    try:
        tc = json.loads((path / "tokenizer_config.json").read_text())
        if isinstance(tc.get("auto_map"), dict) and tc["auto_map"].get("AutoTokenizer"):
            remote = f"its tokenizer is the checkpoint's own code ({tc['auto_map']['AutoTokenizer']})"
    except (OSError, ValueError):
        pass
    return bool(present), remote


def preflight(target, *, trust_remote_code: bool = False) -> Preflight:
    """Whether the target directory (or hub id in the local cache) can run here, and why not."""
    from eagle_nb.io.target_parts import TargetPartsError, read_text_config, resolve
    path = resolve(target)
    try:
        text = read_text_config(path)
        raw = json.loads((path / "config.json").read_text())
    except (TargetPartsError, OSError, ValueError) as e:
        return Preflight(str(target), False, [f"its config cannot be read as data ({e})"])
    pre = Preflight(str(target), True, architecture=lookup(raw), config=raw)
    ok, fact = _weights(path, text.num_hidden_layers)
    pre.facts.append("weights: " + fact)
    if not ok:
        pre.reasons.append(f"its decoder weights are not here ({fact})")
    dtype = str(text.raw.get("torch_dtype") or text.raw.get("dtype") or raw.get("torch_dtype")
                or raw.get("dtype") or "bfloat16").removeprefix("torch.")
    try:
        n = estimate_params(text.raw)
    except (KeyError, TypeError):
        n = None
    if n is not None:
        need = n * BYTES.get(dtype, 2)
        have, where = free_memory()
        pre.facts.append(f"size: about {_count(n)} parameters, {_gib(need)} in {dtype}; "
                         f"{_gib(have)} {where}")
        if need > MEMORY_HEADROOM * have:
            pre.reasons.append(f"it needs about {_gib(need)} for its weights ({_count(n)} "
                               f"parameters in {dtype}) and this machine has {_gib(have)} {where}")
    tok, tok_remote = _tokenizer(path)
    pre.facts.append("tokenizer: " + ("present" if tok else "no tokenizer files ("
                                      + ", ".join(TOKENIZER_FILES) + ")"))
    if not tok:
        pre.reasons.append("it has no tokenizer files here")
    code = [r for r in (remote_code_reason(raw), tok_remote) if r]
    if code:
        given = " (--trust-remote-code given)" if trust_remote_code else ""
        pre.facts.append("code: " + "; ".join(code) + given)
        if not trust_remote_code:
            pre.reasons.append("loading it would run the checkpoint's own code: " + "; ".join(code)
                               + " (pass --trust-remote-code to allow it)")
    pre.can_run = not pre.reasons
    return pre


def plan(pre: Preflight | None, *, dynamic: bool, features=None, observed: str | None = None,
         depth: int = 4, recorded: bool = False, conditions=()) -> list[str]:
    """The phases the doctor will run, in words, decided before any of them starts. `recorded`:
    `features` is a greedy recording of the target, measured instead of the target; `conditions`:
    the serving conditions asked for, measured beside the faults."""
    lines = ["plan: 1. static checks of the drafter's files against the target's config (read as data)"]
    if recorded and dynamic:
        lines.append(f"plan: 2. dynamic: one pass over the recording {features} (the target is not "
                     f"loaded), the pair as written and under each catalogue fault a recording can "
                     f"answer, at k = {depth}")
        lines += [f"plan:    target {f}" for f in (pre.facts if pre is not None else [])]
    elif (pre is None or pre.can_run) and dynamic:          # pre None: an already loaded pair
        lines.append(f"plan: 2. dynamic: the kit's reference loop on the target, the pair as written "
                     f"and under each applicable catalogue fault"
                     + (f" and the serving conditions {', '.join(conditions)}" if conditions else "")
                     + f", at k = {depth}")
    else:
        why = "--static-only" if not dynamic else "the target cannot run here: " + "; ".join(pre.reasons)
        if not observed:
            alt = "nothing (no observation to rank)"
        elif features:
            alt = (f"a replay of the recording {features} (tau of the pair as written) and the "
                   "catalogue's measured fault signatures relative to it")
        else:
            alt = ("the catalogue's measured fault signatures (tau relative to healthy and the "
                   f"per-position shape, at k = {depth})")
        lines.append(f"plan: 2. dynamic: skipped ({why}); instead: {alt}")
        lines += [f"plan:    target {f}" for f in (pre.facts if pre is not None else [])]
    lines.append(f"plan: 3. ranking against the observation ({observed})" if observed
                 else "plan: 3. no ranking: no observation given (--observed LOG / --observed-tau X)")
    return lines
