"""The doctor's static checks of the drafter checkpoint itself: format and key names, missing keys,
d2t / t2d, fc width, lm_head, config flags, weight dtype ranges. Each returns a `diagnosis.Check`
naming the registry faults it is evidence for.

The checkpoint-level facts come from `checkpoints.inspect.inspect_checkpoint` and the structured
findings of `checkpoints.validate` (selected by their codes, never by their words); these checks
add what the engines would do with them (docs/formats.md, docs/drafter.md). Knows nothing about
speculation.
"""
from __future__ import annotations

import re
from pathlib import Path

from eagle_nb.checkpoints.stats import abs_max
from eagle_nb.checkpoints.validate import PROBLEM, WARNING
from eagle_nb.doctor.diagnosis import Check
from eagle_nb.model.fault_names import (ARCHITECTURE_NAME, D2T_ABSOLUTE, D2T_IDENTITY, D2T_SIDE_FILE,
                                        DRAFT_NUM_LAYERS, FC_BYPASS, FC_WIDTH_MISMATCH, FP16_FC_OVERFLOW,
                                        LAYERS0_KEYS_DROPPED, LM_HEAD_MISSING, NORM_BEFORE_FC_DROPPED,
                                        NORM_BEFORE_RESIDUAL_FORCED, NORM_OUTPUT_DROPPED)

FP16_MAX = 65504.0
SIDE_FILE = re.compile(r"(d2t|t2d|vocab_map|token_map|hot_token)", re.I)
FC_CODES = ("fc-width", "target-hidden")        # validate findings about fc's input width


def ck(cid, status, title, evidence, faults=(), fix="") -> Check:
    """A check; its faults (kept only when it warns or fails) must be registry entries."""
    return Check.of(cid, status, title, evidence, faults, fix)


def d2t_findings(rep, level: str) -> list:
    """The validate findings about the vocabulary maps (d2t-*, t2d-*, their shapes)."""
    return [f for f in rep.findings if f.level == level and (f.code.startswith(("d2t-", "t2d-"))
                                                            or f.key in ("d2t", "t2d"))]


def shown(rep, checks) -> set:
    """The validate problems that the d2t and fc-width checks put in their evidence (the side-file
    verdict shows none); the rest go to a 'checkpoint' check of their own."""
    d2t = next(c for c in checks if c.id == "d2t")
    out = set(fc_findings(rep))
    return out if D2T_SIDE_FILE in d2t.faults else out | set(d2t_findings(rep, PROBLEM))


def fc_findings(rep) -> list:
    """The validate problems about fc's input width (its own, the shape of fc.weight, the target's)."""
    return [f for f in rep.findings if f.level == PROBLEM and (f.code in FC_CODES or
                                                              (f.code == "shape" and f.key == "fc.weight"))]


def check_format(rep, raw_cfg) -> Check:
    fmt = rep.format
    names = {"eagle": "`midlayer.*` (EAGLE / SGLang names)", "sglang": "`midlayer.*`",
             "speculators": "`layers.0.*` (vLLM / speculators names)"}[fmt]
    ev = f"format {fmt!r}, keys {names}, weights {rep.notes.get('weights_file')}"
    archs = raw_cfg.get("architectures") or []
    if fmt == "eagle" and "LlamaForCausalLMEagle3" not in archs:
        return ck("format", "warn", "format and key names",
                   ev + f"; architectures {archs}: SGLang loads the wrong class for this name and "
                   "vLLM needs method 'eagle3'", [ARCHITECTURE_NAME],
                   "set architectures to ['LlamaForCausalLMEagle3'] for SGLang (docs/faults.md)")
    if fmt == "speculators":
        ev += "; older SGLang (`midlayer.*` loader) drops these names silently (docs/formats.md)"
    return ck("format", "pass", "format and key names", ev)


def check_keys(rep) -> Check:
    if rep.missing or rep.unexpected:
        faults = [LAYERS0_KEYS_DROPPED] if any(k.startswith("layers.0.") for k in rep.unexpected) else []
        if "lm_head.weight" in rep.missing:
            faults.append(LM_HEAD_MISSING)
        return ck("keys", "fail", "missing / unexpected keys",
                   f"missing {rep.missing}, unexpected {rep.unexpected}", faults,
                   "rename keys with `eagle-nb convert` (a strict key map); engines drop unknown names "
                   "and leave the parameters random")
    return ck("keys", "pass", "missing / unexpected keys", "every parameter present, nothing unknown")


def check_d2t(rep, drafter_dir: Path, state) -> Check:
    cfg = rep.config
    side = [p.name for p in drafter_dir.iterdir() if SIDE_FILE.search(p.name)]
    ev = f"verdict: {rep.d2t_verdict}; Vd {cfg.draft_vocab_size} of V {cfg.vocab_size}"
    probs = [f.message for f in d2t_findings(rep, PROBLEM)]
    warns = [f.message for f in d2t_findings(rep, WARNING)]
    if "d2t" not in state and side:
        return ck("d2t", "fail", "d2t / t2d", ev + f"; side file(s) {side} next to the weights, which "
                   "engines never read: they fall back to the identity mapping", [D2T_SIDE_FILE],
                   "store d2t (int64 offsets) and t2d (bool) inside the weights file (docs/faults.md)")
    if probs:
        absolute = any(f.code == D2T_ABSOLUTE for f in d2t_findings(rep, PROBLEM))
        fault = D2T_ABSOLUTE if absolute else D2T_IDENTITY
        return ck("d2t", "fail", "d2t / t2d", ev + "; " + "; ".join(probs), [fault],
                   "d2t must hold offsets: target id = i + d2t[i] (docs/formats.md)")
    if warns:
        return ck("d2t", "warn", "d2t / t2d", ev + "; " + "; ".join(warns), [D2T_IDENTITY],
                   "rebuild d2t from the draft vocabulary (docs/formats.md)")
    return ck("d2t", "pass", "d2t / t2d", ev)


def check_fc_width(rep, state, tmeta) -> Check:
    cfg = rep.config
    w = state.get("fc.weight")
    Ht = tmeta.get("hidden_size") if tmeta else None
    ev = (f"fc.weight {tuple(w.shape) if w is not None else None}; n_aux {cfg.num_aux} x Ht "
          f"{cfg.target_hidden_size} = {cfg.fc_in_features}" + (f"; target hidden_size {Ht}" if Ht else ""))
    probs = [f.message for f in fc_findings(rep)]
    if w is None or probs:
        return ck("fc-width", "fail", "fc width vs n_aux x Ht", ev + ("; " + "; ".join(probs) if probs else
                   "; no fc.weight"), [FC_WIDTH_MISMATCH], "fc input width must be n_aux x target hidden size")
    if cfg.target_hidden_size == cfg.hidden_size:
        ev += ("; Ht == H, so an engine that is handed one final hidden state instead of the aux "
               "states skips fc by its width check without an error (docs/drafter.md)")
    return ck("fc-width", "pass", "fc width vs n_aux x Ht", ev)


def check_lm_head(rep, state) -> Check:
    cfg = rep.config
    w = state.get("lm_head.weight")
    if w is None:
        return ck("lm-head", "fail", "lm_head", f"absent while draft_vocab_size = {cfg.draft_vocab_size}: "
                   "SGLang leaves the head at random init without a message", [LM_HEAD_MISSING],
                   "ship the trained lm_head (or the target head rows selected by t2d) (docs/faults.md)")
    return ck("lm-head", "pass", "lm_head", f"present {tuple(w.shape)} = (draft_vocab_size, hidden_size)")


def check_flags(rep, raw_cfg) -> Check:
    cfg = rep.config
    layer_cfg = raw_cfg.get("transformer_layer_config") or raw_cfg
    n = layer_cfg.get("num_hidden_layers", 1)
    flags = {k: getattr(cfg, k) for k in ("norm_before_fc", "fc_norm", "norm_before_residual", "norm_output")}
    ev = f"num_hidden_layers {n}; " + ", ".join(f"{k}={v}" for k, v in flags.items())
    if n != 1:
        return ck("config-flags", "fail", "draft config", ev + ": older SGLang raises 'EAGLE3 "
                   "currently only supports 1 layer'; vLLM builds extra random layers",
                   [DRAFT_NUM_LAYERS], "set num_hidden_layers to 1 (docs/faults.md)")
    notes, faults = [], []
    if rep.format == "speculators" and "norm_before_residual" not in raw_cfg:
        notes.append("norm_before_residual absent: vLLM's speculators adapter fills True")
        faults.append(NORM_BEFORE_RESIDUAL_FORCED)
    if flags["norm_before_fc"]:
        notes.append("norm_before_fc is honoured by vLLM >= PR #38111 and speculators; SGLang only "
                     "for GPT-OSS")
        faults.append(NORM_BEFORE_FC_DROPPED)
    if flags["norm_output"]:
        notes.append("norm_output: vLLM/speculators feed the post-norm state back; SpecForge's flag "
                     "of that name means something else (docs/drafter.md)")
        faults.append(NORM_OUTPUT_DROPPED)
    if raw_cfg.get("bias") is True:
        notes.append("'bias': true makes SGLang create an fc.bias no checkpoint supplies")
    if (raw_cfg.get("eagle_config") or {}).get("use_aux_hidden_state") is False:
        return ck("config-flags", "fail", "draft config", ev + "; use_aux_hidden_state false: the "
                   "engines hand over one hidden state and build no fc", [FC_BYPASS],
                   "set eagle_config.use_aux_hidden_state true")
    if notes:
        return ck("config-flags", "warn", "draft config", ev + "; " + "; ".join(notes), faults,
                   "check the serving engine honours these flags as the trainer did (docs/drafter.md)")
    return ck("config-flags", "pass", "draft config", ev + "; no variant flags")


def check_dtype(rep, state) -> Check:
    floats = {k: v for k, v in state.items() if v.is_floating_point()}
    dtypes = sorted({str(v.dtype).replace("torch.", "") for v in floats.values()})
    wmax = abs_max(state)            # streamed: one chunk in memory at a time
    ev = f"weights {dtypes}, max |w| {wmax:.3g} (fp16 max {FP16_MAX:.0f})"
    if wmax > FP16_MAX:
        return ck("dtype", "fail", "dtype ranges", ev, [FP16_FC_OVERFLOW], "serve in bf16 or fp32")
    return ck("dtype", "pass", "dtype ranges", ev + "; activations are measured in the dynamic part")
