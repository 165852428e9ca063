"""The doctor's static part: what a drafter checkpoint and a target's config say, in seconds, with
no generation and without loading the target's weights (its config and, when asked, its input
embedding are read lazily with safetensors).

Each check returns a `diagnosis.Check` (pass / warn / fail / skip) with the evidence and the fault
names it points at. The checkpoint-level facts (format, keys, shapes, d2t/t2d, fc width) come from
`checkpoints.inspect_checkpoint` and `validate`; this module adds what the engines would do with
them: which layers SGLang and vLLM would capture for the ids as written (docs/layers.md),
which config flags they honour (docs/drafter.md), whether their capture finds the target's decoder, and how
the drafter's embedding, head, RoPE and dtype compare with the target.

Knows nothing about speculation or ranking.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from eagle_nb.checkpoints.stats import EMBED, abs_max, embedding_agreement
from eagle_nb.doctor.diagnosis import Check
from eagle_nb.io.lazy_weights import LazyState, WeightFile
from eagle_nb.model.layers import eagle3_layers, from_hf, sglang_capture_ids, to_hf

FP16_MAX = 65504.0
# Which check sees each catalogue fault in a checkpoint/config (None: no static trace; the
# doctor's probes and the observed profile are then the only evidence). Pinned by tests that
# plant each fault and expect the named check to name it.
SEES = {
    "layers0-keys-dropped": "keys (fail: `layers.0.*` under a `midlayer.*` config)",
    "embed-random": "embed-tokens (warn: own embedding unrelated to the target's)",
    "embed-target-forced": "embed-tokens (warn: the drafter has its own embedding)",
    "lm-head-missing": "lm-head, keys (fail)",
    "norm-before-fc-dropped": "config-flags (warn: flag set, not honoured everywhere)",
    "norm-before-fc-forced": None,
    "norm-output-dropped": "config-flags (warn: flag set, not honoured everywhere)",
    "norm-output-forced": None,
    "norm-before-residual-forced": "config-flags (warn: field absent from a speculators config)",
    "output-norm-residual": None,
    "rope-theta-wrong": "rope (warn, when the draft's RoPE differs from the target's)",
    "fp16-fc-overflow": "dtype, dtype-range (measured max |activation| in fc vs the fp16 range)",
    "d2t-absolute": "d2t (fail)",
    "d2t-identity": "d2t (warn: all-zero d2t with Vd < V); an engine ignoring d2t: none",
    "d2t-side-file": "d2t (fail: the side file is named)",
    "wrapper-capture": "target-layout (warn)",
    "fc-bypass": None,
    "layer-ids+1": "aux-ids (warn, when the engines' conventions disagree)",
    "layer-ids-1": "aux-ids (warn, when the engines' conventions disagree)",
    "layer-ids-heuristic": "aux-ids (warn)",
    "chat-template-mismatch": None,
    "fc-width-mismatch": "fc-width, aux-ids (fail)",
    "draft-num-layers": "config-flags (fail)",
    "no-eagle3-interface": None,
    "no-capture-hooks": None,
    "draft-vocab-short": "d2t (fail: shape)",
}
# Faults that are properties of the checkpoint or target files: when the check that would see
# them passes, the files do not have them, so the doctor rules them out whatever the acceptance.
RULED_OUT_BY_PASS = {"embed-random": "embed-tokens", "lm-head-missing": "lm-head",
                     "d2t-side-file": "d2t", "draft-num-layers": "config-flags",
                     "norm-before-residual-forced": "config-flags", "wrapper-capture": "target-layout",
                     "fc-width-mismatch": "fc-width", "vocab-mismatch": "vocab"}
SIDE_FILE = re.compile(r"(d2t|t2d|vocab_map|token_map|hot_token)", re.I)


# -- the target, lazily -----------------------------------------------------------------------------
@dataclass
class TargetMeta:
    """What the static part needs from a target: its text config and weight names; the input
    embedding is read on demand."""
    source: str
    config: dict                          # the text config (nested `text_config` resolved)
    architectures: list[str]
    weight_keys: list[str]
    _embedding: object = field(default=None, repr=False)   # callable -> tensor, or a tensor

    @property
    def num_layers(self) -> int | None:
        return self.config.get("num_hidden_layers")

    def get(self, key, default=None):
        return self.config.get(key, default)

    def embedding(self) -> dict:
        """{"embed_tokens.weight": the target's input embedding} (a memory-mapped `LazyState`
        for a checkpoint directory, streamed by checkpoints/stats.py), or {} when it has none."""
        e = self._embedding
        e = e() if callable(e) else e
        return e if isinstance(e, dict) else {} if e is None else {EMBED: e}


def _embedding_key(keys) -> str | None:
    cands = [k for k in keys if k.endswith("embed_tokens.weight") and "vision" not in k]
    return min(cands, key=len) if cands else None


def target_meta(target) -> TargetMeta | None:
    """Config, weight names and a lazy embedding reader for a target given as a checkpoint
    directory or a loaded HF model. The one place that touches the target's files."""
    if target is None:
        return None
    if not isinstance(target, (str, Path)):          # a loaded model
        cfg = target.config
        tcfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
        keys = list(target.state_dict().keys())
        return TargetMeta(type(target).__name__, tcfg.to_dict(), list(cfg.architectures or
                          [type(target).__name__]), keys, target.get_input_embeddings().weight.detach())
    path = Path(target)
    f = path / "config.json"
    if not f.exists():
        raise FileNotFoundError(f"target {path}: no config.json")
    raw = json.loads(f.read_text())
    text = raw.get("text_config") or raw
    files = sorted(path.glob("*.safetensors"))
    keys, where = [], {}
    from safetensors import safe_open
    for sf in files:
        with safe_open(str(sf), "pt") as h:
            for k in h.keys():
                keys.append(k)
                where[k] = sf
    emb_key = _embedding_key(keys)

    def read_embedding():
        if emb_key is None:
            return None
        wf = WeightFile(where[emb_key])
        return LazyState({EMBED: wf.tensor(emb_key)}, wf, {EMBED: emb_key})
    return TargetMeta(str(path), dict(text, architectures=raw.get("architectures")),
                      list(raw.get("architectures") or []), keys, read_embedding)


# -- helpers ---------------------------------------------------------------------------------------
def _ck(cid, status, title, evidence, faults=(), fix=""):
    return Check(cid, status, title, evidence, list(faults) if status in ("warn", "fail") else [], fix)


def _layer_prefix(keys) -> str | None:
    pats = {re.sub(r"\.\d+\..*$", "", k) for k in keys if re.search(r"\.layers\.\d+\.", "." + k)}
    return min(pats, key=len) if pats else None


# -- the checks ------------------------------------------------------------------------------------
def check_format(rep, raw_cfg) -> Check:
    fmt = rep.format
    names = {"eagle": "`midlayer.*` (EAGLE / SGLang names)", "sglang": "`midlayer.*`",
             "speculators": "`layers.0.*` (vLLM / speculators names)"}[fmt]
    ev = f"format {fmt!r}, keys {names}, weights {rep.notes.get('weights_file')}"
    archs = raw_cfg.get("architectures") or []
    if fmt == "eagle" and "LlamaForCausalLMEagle3" not in archs:
        return _ck("format", "warn", "format and key names",
                   ev + f"; architectures {archs}: SGLang loads the wrong class for this name and "
                   "vLLM needs method 'eagle3'", ["architecture-name"],
                   "set architectures to ['LlamaForCausalLMEagle3'] for SGLang (docs/faults.md)")
    if fmt == "speculators":
        ev += "; older SGLang (`midlayer.*` loader) drops these names silently (docs/formats.md)"
    return _ck("format", "pass", "format and key names", ev)


def check_keys(rep) -> Check:
    if rep.missing or rep.unexpected:
        faults = ["layers0-keys-dropped"] if any(k.startswith("layers.0.") for k in rep.unexpected) else []
        if "lm_head.weight" in rep.missing:
            faults.append("lm-head-missing")
        return _ck("keys", "fail", "missing / unexpected keys",
                   f"missing {rep.missing}, unexpected {rep.unexpected}", faults,
                   "rename keys with `eagle-nb convert` (a strict key map); engines drop unknown names "
                   "and leave the parameters random")
    return _ck("keys", "pass", "missing / unexpected keys", "every parameter present, nothing unknown")


def check_d2t(rep, drafter_dir: Path, state) -> Check:
    cfg = rep.config
    side = [p.name for p in drafter_dir.iterdir() if SIDE_FILE.search(p.name)]
    ev = f"verdict: {rep.d2t_verdict}; Vd {cfg.draft_vocab_size} of V {cfg.vocab_size}"
    probs = [p for p in rep.problems if "d2t" in p or "t2d" in p]
    warns = [w for w in rep.warnings if "d2t" in w or "t2d" in w]
    if "d2t" not in state and side:
        return _ck("d2t", "fail", "d2t / t2d", ev + f"; side file(s) {side} next to the weights, which "
                   "engines never read: they fall back to the identity mapping", ["d2t-side-file"],
                   "store d2t (int64 offsets) and t2d (bool) inside the weights file (docs/faults.md)")
    if probs:
        fault = "d2t-absolute" if "absolute" in rep.d2t_verdict else "d2t-identity"
        return _ck("d2t", "fail", "d2t / t2d", ev + "; " + "; ".join(probs), [fault],
                   "d2t must hold offsets: target id = i + d2t[i] (docs/formats.md)")
    if warns:
        return _ck("d2t", "warn", "d2t / t2d", ev + "; " + "; ".join(warns), ["d2t-identity"],
                   "rebuild d2t from the draft vocabulary (docs/formats.md)")
    return _ck("d2t", "pass", "d2t / t2d", ev)


def engine_captures(rep, raw_cfg, L: int) -> dict:
    """HF ids each engine would capture for this config, and the ids the drafter was trained on."""
    default = list(eagle3_layers(L))
    nested = (raw_cfg.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    top = raw_cfg.get("eagle_aux_hidden_state_layer_ids")
    trained = rep.config.aux_layer_ids or default
    return {
        "trained (kit reading)": trained,
        "vLLM": to_hf(top, "vllm") if top else default,               # reads the top-level field only
        "SGLang llama.py (+1 always)":
            sglang_capture_ids(nested, "LlamaForCausalLM") if nested else default,
        "SGLang first-id rule (PR #25454; DeepSeek-V2 / GLM-4-MoE-lite family, >= 0.5.13)":
            sglang_capture_ids(nested, "DeepseekV2ForCausalLM") if nested else default,
    }


def check_aux_ids(rep, raw_cfg, tmeta) -> Check:
    cfg = rep.config
    written = cfg.extra.get("sglang_config_ids") or raw_cfg.get("eagle_aux_hidden_state_layer_ids")
    if tmeta is None or tmeta.num_layers is None:
        return _ck("aux-ids", "skip", "aux layer ids vs target",
                   f"ids as written {written}, HF {cfg.aux_layer_ids}; pass --target to check them")
    L = tmeta.num_layers
    caps = engine_captures(rep, raw_cfg, L)
    trained = caps["trained (kit reading)"]
    conv = ("HF / vLLM (input of layer k)" if rep.format != "sglang" else "output of layer k (+1 = HF)")
    ev = (f"L = {L}; as written {written if written is not None else 'none (EAGLE default implied)'} "
          f"[{conv}] -> HF {trained}; to write them for vLLM (top-level) {from_hf(trained, 'vllm')}, "
          f"for SGLang (nested eagle_config) {from_hf(trained, 'sglang-config')}; "
          + "; ".join(f"{k} captures {v}" for k, v in caps.items() if k != "trained (kit reading)"))
    bad = [i for i in trained if not 0 <= i <= L]
    if bad:
        return _ck("aux-ids", "fail", "aux layer ids vs target", ev + f"; ids {bad} outside 0..{L}",
                   ["fc-width-mismatch"], f"use ids within 0..{L} (HF convention)")
    notes, faults = [], []
    if L in trained:
        notes.append(f"id {L} is the final boundary: it must be captured pre-norm (HF's "
                     f"hidden_states[{L}] is post-norm); SGLang's before-layer capture cannot reach "
                     "it and vLLM only after PR #36063, so fc gets N-1 states and fails (docs/faults.md)")
        faults += ["fc-width-mismatch"]
    if 0 in trained:
        notes.append("id 0 (embeddings) is not capturable by SGLang (residual is None before layer 0)")
    for eng, ids in caps.items():
        if eng == "trained (kit reading)" or ids == trained:
            continue
        d = [a - b for a, b in zip(ids, trained)]
        if len(set(d)) == 1 and d[0] in (1, -1):
            faults.append("layer-ids+1" if d[0] == 1 else "layer-ids-1")
            notes.append(f"{eng} would capture {ids}, one boundary {'later' if d[0] == 1 else 'earlier'}")
        else:
            faults.append("layer-ids-heuristic")
            notes.append(f"{eng} would capture {ids} instead of {trained}")
    if notes:
        return _ck("aux-ids", "warn", "aux layer ids vs target", ev + "; " + "; ".join(notes),
                   list(dict.fromkeys(faults)),
                   "write the ids in the convention the serving engine reads: top-level "
                   "`eagle_aux_hidden_state_layer_ids` (HF ids) for vLLM, nested "
                   "`eagle_config` (output-of-layer ids) for SGLang (docs/layers.md)")
    return _ck("aux-ids", "pass", "aux layer ids vs target", ev + "; every engine captures the trained ids")


def check_fc_width(rep, state, tmeta) -> Check:
    cfg = rep.config
    w = state.get("fc.weight")
    Ht = tmeta.get("hidden_size") if tmeta else None
    ev = (f"fc.weight {tuple(w.shape) if w is not None else None}; n_aux {cfg.num_aux} x Ht "
          f"{cfg.target_hidden_size} = {cfg.fc_in_features}" + (f"; target hidden_size {Ht}" if Ht else ""))
    probs = [p for p in rep.problems if "fc.weight" in p or "target hidden_size" in p]
    if w is None or probs:
        return _ck("fc-width", "fail", "fc width vs n_aux x Ht", ev + ("; " + "; ".join(probs) if probs else
                   "; no fc.weight"), ["fc-width-mismatch"], "fc input width must be n_aux x target hidden size")
    if cfg.target_hidden_size == cfg.hidden_size:
        ev += ("; Ht == H, so an engine that is handed one final hidden state instead of the aux "
               "states skips fc by its width check without an error (docs/drafter.md)")
    return _ck("fc-width", "pass", "fc width vs n_aux x Ht", ev)


def check_embed(rep, state, tmeta) -> Check:
    cfg = rep.config
    emb = state.get("embed_tokens.weight")
    if emb is None:
        ev = "absent: engines take the target's"
        if tmeta is not None and tmeta.get("vocab_size") not in (None, cfg.vocab_size):
            return _ck("embed-tokens", "fail", "embed_tokens", ev + f", but target vocab "
                       f"{tmeta.get('vocab_size')} != drafter vocab {cfg.vocab_size}", ["vocab-mismatch"],
                       "pair the drafter with the target it was trained on")
        return _ck("embed-tokens", "pass", "embed_tokens", ev)
    ev = f"present {tuple(emb.shape)}"
    tstate = tmeta.embedding() if tmeta is not None else {}
    temb = tstate.get(EMBED)
    if temb is None:
        return _ck("embed-tokens", "pass", "embed_tokens", ev + "; no target embedding to compare")
    if tuple(temb.shape) != tuple(emb.shape):
        return _ck("embed-tokens", "fail", "embed_tokens", ev + f" vs target {tuple(temb.shape)}",
                   ["vocab-mismatch"], "pair the drafter with the target it was trained on")
    rel, cos = embedding_agreement(state, tstate)   # streamed by blocks of rows
    ev += f"; vs target's: relative difference {rel:.3g}, mean row cosine {cos:.3f}"
    if rel < 1e-2:
        return _ck("embed-tokens", "pass", "embed_tokens", ev + " (the target's, as stored in fp16/bf16)")
    if cos < 0.2:
        return _ck("embed-tokens", "warn", "embed_tokens", ev + ": unrelated to the target's "
                   "(random or another model's); vLLM uses it, SGLang replaces it with the target's",
                   ["embed-random"], "drop embed_tokens from the checkpoint if it was not trained "
                   "(TorchSpec #38), so every engine takes the target's")
    return _ck("embed-tokens", "warn", "embed_tokens", ev + ": the drafter's own (fine-tuned?) "
               "embedding; engines that force the target's would change acceptance",
               ["embed-target-forced"], "serve with an engine that keeps a loaded draft embedding "
               "(vLLM >= PR #28549)")


def check_lm_head(rep, state) -> Check:
    cfg = rep.config
    w = state.get("lm_head.weight")
    if w is None:
        return _ck("lm-head", "fail", "lm_head", f"absent while draft_vocab_size = {cfg.draft_vocab_size}: "
                   "SGLang leaves the head at random init without a message", ["lm-head-missing"],
                   "ship the trained lm_head (or the target head rows selected by t2d) (docs/faults.md)")
    return _ck("lm-head", "pass", "lm_head", f"present {tuple(w.shape)} = (draft_vocab_size, hidden_size)")


def check_flags(rep, raw_cfg) -> Check:
    cfg = rep.config
    layer_cfg = raw_cfg.get("transformer_layer_config") or raw_cfg
    n = layer_cfg.get("num_hidden_layers", 1)
    flags = {k: getattr(cfg, k) for k in ("norm_before_fc", "fc_norm", "norm_before_residual", "norm_output")}
    ev = f"num_hidden_layers {n}; " + ", ".join(f"{k}={v}" for k, v in flags.items())
    if n != 1:
        return _ck("config-flags", "fail", "draft config", ev + ": older SGLang raises 'EAGLE3 "
                   "currently only supports 1 layer'; vLLM builds extra random layers",
                   ["draft-num-layers"], "set num_hidden_layers to 1 (docs/faults.md)")
    notes, faults = [], []
    if rep.format == "speculators" and "norm_before_residual" not in raw_cfg:
        notes.append("norm_before_residual absent: vLLM's speculators adapter fills True")
        faults.append("norm-before-residual-forced")
    if flags["norm_before_fc"]:
        notes.append("norm_before_fc is honoured by vLLM >= PR #38111 and speculators; SGLang only "
                     "for GPT-OSS")
        faults.append("norm-before-fc-dropped")
    if flags["norm_output"]:
        notes.append("norm_output: vLLM/speculators feed the post-norm state back; SpecForge's flag "
                     "of that name means something else (docs/drafter.md)")
        faults.append("norm-output-dropped")
    if raw_cfg.get("bias") is True:
        notes.append("'bias': true makes SGLang create an fc.bias no checkpoint supplies")
    if (raw_cfg.get("eagle_config") or {}).get("use_aux_hidden_state") is False:
        return _ck("config-flags", "fail", "draft config", ev + "; use_aux_hidden_state false: the "
                   "engines hand over one hidden state and build no fc", ["fc-bypass"],
                   "set eagle_config.use_aux_hidden_state true")
    if notes:
        return _ck("config-flags", "warn", "draft config", ev + "; " + "; ".join(notes), faults,
                   "check the serving engine honours these flags as the trainer did (docs/drafter.md)")
    return _ck("config-flags", "pass", "draft config", ev + "; no variant flags")


def check_rope(rep, tmeta) -> Check:
    cfg = rep.config
    ev = f"draft rope_theta {cfg.rope_theta}, scaling {cfg.rope_scaling}"
    if tmeta is None:
        return _ck("rope", "skip", "RoPE vs target", ev + "; no target")
    params = tmeta.get("rope_parameters") or {}
    t_theta = float(tmeta.get("rope_theta") or params.get("rope_theta") or 10000.0)
    t_type = (tmeta.get("rope_scaling") or {}).get("rope_type") or params.get("rope_type", "default")
    d_type = (cfg.rope_scaling or {}).get("rope_type", (cfg.rope_scaling or {}).get("type", "default"))
    ev += f"; target rope_theta {t_theta}, type {t_type}"
    if t_theta != cfg.rope_theta or t_type != d_type:
        return _ck("rope", "warn", "RoPE vs target", ev + ": engines use the draft config's values; "
                   "right only if the drafter was trained with them (EAGLE's Llama-3.1 drafts use "
                   "10000 against the target's 500000)", ["rope-theta-wrong"],
                   "keep the RoPE values the drafter was trained with in its config")
    return _ck("rope", "pass", "RoPE vs target", ev)


def check_dtype(rep, state) -> Check:
    floats = {k: v for k, v in state.items() if v.is_floating_point()}
    dtypes = sorted({str(v.dtype).replace("torch.", "") for v in floats.values()})
    wmax = abs_max(state)            # streamed: one chunk in memory at a time
    ev = f"weights {dtypes}, max |w| {wmax:.3g} (fp16 max {FP16_MAX:.0f})"
    if wmax > FP16_MAX:
        return _ck("dtype", "fail", "dtype ranges", ev, ["fp16-fc-overflow"], "serve in bf16 or fp32")
    return _ck("dtype", "pass", "dtype ranges", ev + "; activations are measured in the dynamic part")


def check_target_layout(tmeta) -> Check:
    if tmeta is None:
        return _ck("target-layout", "skip", "target decoder layout", "no target")
    prefix = _layer_prefix(tmeta.weight_keys)
    ev = f"architectures {tmeta.architectures}; decoder layers under {prefix!r}"
    if prefix in ("model.layers", "layers"):
        return _ck("target-layout", "pass", "target decoder layout", ev + ": engine-style capture "
                   "(`model.layers`) finds them")
    return _ck("target-layout", "warn", "target decoder layout", ev + ": a wrapper layout; capture code "
               "that looks for `model.layers` finds nothing and hands over the final hidden state",
               ["wrapper-capture"], "serve with an engine version whose class for this architecture "
               "passes the aux states (vLLM SupportsEagle3, SGLang set_eagle3_layers_to_capture; docs/faults.md)")


def check_vocab(rep, tmeta) -> Check:
    cfg = rep.config
    tv = tmeta.get("vocab_size") if tmeta else None
    ev = f"drafter vocab {cfg.vocab_size}, draft vocab {cfg.draft_vocab_size}, target vocab {tv}"
    if tv is not None and tv != cfg.vocab_size:
        return _ck("vocab", "fail", "vocabulary", ev, ["vocab-mismatch"],
                   "pair the drafter with the target (and tokenizer) it was trained on")
    return _ck("vocab", "pass" if tv is not None else "skip", "vocabulary", ev)


def run_static(drafter, target=None) -> tuple[list[Check], object, dict, TargetMeta | None]:
    """All static checks. Returns (checks, validate.Report, renamed state dict, target meta)."""
    from eagle_nb.checkpoints.detect import read_config
    from eagle_nb.checkpoints.inspect import inspect_checkpoint
    drafter = Path(drafter)
    tmeta = target_meta(target)
    tcfg = None
    if tmeta is not None:
        from types import SimpleNamespace
        tcfg = SimpleNamespace(**{k: tmeta.get(k) for k in ("vocab_size", "hidden_size", "num_hidden_layers")})
    rep, state = inspect_checkpoint(drafter, tcfg, scan=True)   # every value, streamed
    raw = read_config(drafter)
    checks = [check_format(rep, raw), check_keys(rep), check_d2t(rep, drafter, state),
              check_aux_ids(rep, raw, tmeta), check_fc_width(rep, state, tmeta),
              check_embed(rep, state, tmeta), check_lm_head(rep, state), check_flags(rep, raw),
              check_rope(rep, tmeta), check_dtype(rep, state), check_target_layout(tmeta),
              check_vocab(rep, tmeta)]
    seen = " ".join(c.evidence for c in checks)
    rest = [p for p in rep.problems if p not in seen]
    if rest:
        checks.append(_ck("checkpoint", "fail", "other checkpoint problems", "; ".join(rest)))
    return checks, rep, state, tmeta
