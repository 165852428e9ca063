"""Checks on a drafter checkpoint's tensors: the faults the serving engines let through silently.

Every check adds `Finding`s to a `Report`: a stable `code` (what a caller such as the doctor selects
on; never parse the message), a level (a problem: loading refuses; a warning: loading proceeds,
inspect prints it), a message that names the key, shape or value at fault, and the tensor key
when there is one. Codes: d2t-missing, d2t-dtype, d2t-shape, d2t-absolute, d2t-invalid, d2t-order,
d2t-all-zero, t2d-missing, t2d-dtype, t2d-shape, t2d-count, t2d-disagrees (vocabulary maps);
non-finite, shape, fc-width (tensors); target-vocab, target-hidden, embed-shape, aux-ids-range
(against the target); keys, ignored-keys, train-serve, embed-missing (inspect.py, load.py).
d2t-absolute is the fault's own name (`model.fault_names.D2T_ABSOLUTE`): the finding is that fault.
Knows nothing about file formats; inspect.py feeds it a renamed state dict and a DrafterConfig.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from eagle_nb.io.lazy_weights import stream
from eagle_nb.model.config import DrafterConfig
from eagle_nb.model.fault_names import D2T_ABSOLUTE


PROBLEM, WARNING = "problem", "warning"


@dataclass(frozen=True)
class Finding:
    code: str                   # stable id of what was found (module docstring); callers select on it
    level: str                  # PROBLEM (loading refuses) | WARNING
    message: str                # for people; never parsed
    key: str | None = None      # the tensor it is about, when one


@dataclass
class Report:
    path: str
    format: str | None = None
    config: DrafterConfig | None = None
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    d2t_verdict: str = "not checked"
    notes: dict = field(default_factory=dict)
    ids_as_written: dict | None = None   # {"field", "ids", "convention"} as in config.json; None: absent
    key_names: dict = field(default_factory=dict)  # checkpoint key -> (eagle_nb key | None, shape)

    def problem(self, code: str, message: str, key: str | None = None) -> None:
        self.findings.append(Finding(code, PROBLEM, message, key))

    def warn(self, code: str, message: str, key: str | None = None) -> None:
        self.findings.append(Finding(code, WARNING, message, key))

    @property
    def problems(self) -> list[str]:
        return [f.message for f in self.findings if f.level == PROBLEM]

    @property
    def warnings(self) -> list[str]:
        return [f.message for f in self.findings if f.level == WARNING]

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        c = self.config
        return {
            "path": self.path, "format": self.format, "ok": self.ok,
            "hidden_size": c and c.hidden_size, "target_hidden_size": c and c.target_hidden_size,
            "vocab_size": c and c.vocab_size, "draft_vocab_size": c and c.draft_vocab_size,
            "num_aux": c and c.num_aux, "fc_in_features": c and c.fc_in_features,
            "aux_layer_ids_hf": c and c.aux_layer_ids,
            "flags": c and {k: getattr(c, k) for k in
                            ("norm_before_fc", "fc_norm", "norm_before_residual", "norm_output")},
            "d2t_verdict": self.d2t_verdict, "missing": self.missing, "unexpected": self.unexpected,
            "problems": self.problems, "warnings": self.warnings, **self.notes,
        }

    def lines(self) -> list[str]:
        """The report as `eagle-nb inspect` prints it: one `field: value` line each."""
        return [f"{k:>22}: {v}" for k, v in self.as_dict().items()]


def check_d2t_t2d(d2t, t2d, cfg: DrafterConfig, rep: Report) -> None:
    """d2t: int64 offsets, target = i + d2t[i] in [0, V), unique; t2d: bool mask agreeing with it."""
    V, Vd = cfg.vocab_size, cfg.draft_vocab_size
    if d2t is None:
        if Vd != V:
            rep.problem("d2t-missing", f"d2t missing while draft_vocab_size {Vd} != vocab_size {V}: engines "
                                f"would map draft id i to target id i and acceptance collapses")
            rep.d2t_verdict = "missing"
        else:
            rep.d2t_verdict = "absent (identity: draft vocab == target vocab)"
        return
    if d2t.dtype != torch.int64:
        msg = f"d2t dtype is {d2t.dtype}, expected torch.int64"
        if d2t.is_floating_point():
            msg += " (float ids above 2048 are not exact in fp16, above 256 in bf16)"
        rep.problem("d2t-dtype", msg, "d2t")
    if tuple(d2t.shape) != (Vd,):
        rep.problem("d2t-shape", f"d2t shape {tuple(d2t.shape)} != (draft_vocab_size,) = ({Vd},)", "d2t")
        rep.d2t_verdict = "wrong shape"
        return
    d = d2t.long()
    mapped = torch.arange(Vd) + d
    as_offsets_ok = bool((mapped >= 0).all() and (mapped < V).all()
                         and mapped.unique().numel() == Vd)
    strictly_inc = bool((d[1:] > d[:-1]).all())
    as_absolute_ok = strictly_inc and bool((d >= 0).all() and (d < V).all())
    # the same mistake the other way round: offsets taken for ids had arange subtracted, so that
    # i + d2t[i] is the offset table itself (non-decreasing, and a valid map once arange is added)
    twice = mapped + torch.arange(Vd)
    as_offsets_minus_arange = bool((mapped[1:] >= mapped[:-1]).all() and (twice >= 0).all()
                                   and (twice < V).all() and (twice[1:] > twice[:-1]).all())
    if not as_offsets_ok and as_absolute_ok:
        rep.problem(D2T_ABSOLUTE, "d2t looks like absolute target ids, not offsets (strictly increasing, "
                    f"i + d2t[i] reaches {int(mapped.max())} >= V={V}); store d2t - arange(Vd)", "d2t")
        rep.d2t_verdict = "absolute ids (wrong)"
    elif not as_offsets_ok and as_offsets_minus_arange:
        dup = int(Vd - mapped.unique().numel())
        rep.problem(D2T_ABSOLUTE, "d2t holds the offsets minus arange(Vd): i + d2t[i] is the offset "
                    f"table itself (non-decreasing, {dup} duplicate target ids), so draft id i "
                    "lands on target id offset[i], as when offsets are read as absolute ids; "
                    "store d2t + arange(Vd)", "d2t")
        rep.d2t_verdict = "offsets minus arange (wrong)"
    elif not as_offsets_ok:
        bad = ((mapped < 0) | (mapped >= V)).nonzero().flatten()[:5].tolist()
        dup = int(Vd - mapped.unique().numel())
        rep.problem("d2t-invalid", f"d2t offsets invalid: i + d2t[i] out of [0, {V}) at draft ids "
                    f"{bad}, {dup} duplicate target ids", "d2t")
        rep.d2t_verdict = "invalid"
    else:
        rep.d2t_verdict = "offsets (ok)"
        if (d < 0).any() or (d[1:] < d[:-1]).any():
            rep.warn("d2t-order", "d2t offsets are negative or decreasing: not built by the public "
                     "builders (sorted ids, offsets >= 0); was arange subtracted twice?", "d2t")
            rep.d2t_verdict = "offsets (unusual order)"
        if Vd < V and not d.any():
            rep.warn("d2t-all-zero", "d2t is all zeros with draft_vocab_size < vocab_size: identity "
                     "mapping onto the first Vd target ids (a default, not a mapping?)", "d2t")
            rep.d2t_verdict = "all zeros (suspicious)"
    if t2d is None:
        if Vd != V:
            rep.warn("t2d-missing", "t2d missing; rebuilt from d2t")
        return
    if t2d.dtype != torch.bool:
        rep.problem("t2d-dtype", f"t2d dtype is {t2d.dtype}, expected torch.bool", "t2d")
    if tuple(t2d.shape) != (V,):
        rep.problem("t2d-shape", f"t2d shape {tuple(t2d.shape)} != (vocab_size,) = ({V},)", "t2d")
        return
    if int(t2d.bool().sum()) != Vd:
        rep.problem("t2d-count", f"t2d marks {int(t2d.bool().sum())} ids but draft_vocab_size is {Vd}", "t2d")
    elif as_offsets_ok and not bool(t2d.bool()[mapped].all()):
        rep.problem("t2d-disagrees", "t2d disagrees with d2t: some target ids i + d2t[i] are not "
                    "marked in t2d", "t2d")


def check_finite(state: dict, rep: Report) -> None:
    bad = [k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        rep.problem("non-finite", f"NaN/inf values in weights: {bad}")


def check_finite_streamed(state: dict, rep: Report) -> None:
    """check_finite reading each tensor in bounded chunks (io/lazy_weights.py `stream`)."""
    bad = [k for k, v in state.items() if v.is_floating_point()
           and not all(bool(torch.isfinite(c).all()) for c in stream(state, k))]
    if bad:
        rep.problems.append(f"NaN/inf values in weights: {bad}")


def check_shapes(state: dict, expected: dict, rep: Report, path: str) -> None:
    """Compare every present tensor against the shape the config implies."""
    for k, want in expected.items():
        if k in state and tuple(state[k].shape) != tuple(want):
            rep.problem("shape", f"{path}: {k} has shape {tuple(state[k].shape)}, config implies "
                                 f"{tuple(want)}", k)


def check_fc_width(state: dict, cfg: DrafterConfig, rep: Report) -> None:
    w = state.get("fc.weight")
    if w is not None and w.shape[1] != cfg.fc_in_features:
        rep.problem(
            "fc-width", f"fc.weight input width {w.shape[1]} != n_aux x target_hidden_size = "
            f"{cfg.num_aux} x {cfg.target_hidden_size} = {cfg.fc_in_features}", "fc.weight")


def check_against_target(cfg: DrafterConfig, target_config, embed_shape, rep: Report) -> None:
    """Drafter vs target: vocabulary, captured width, layer ids in range."""
    tv = getattr(target_config, "vocab_size", None)
    th = getattr(target_config, "hidden_size", None)
    L = getattr(target_config, "num_hidden_layers", None)
    if tv is not None and tv != cfg.vocab_size:
        rep.problem("target-vocab", f"target vocab_size {tv} != drafter vocab_size {cfg.vocab_size}")
    if th is not None and th != cfg.target_hidden_size:
        rep.problem("target-hidden", f"target hidden_size {th} != drafter target_hidden_size "
                    f"{cfg.target_hidden_size} (fc expects {cfg.fc_in_features})")
    if embed_shape is not None and tuple(embed_shape) != (cfg.vocab_size, cfg.hidden_size):
        rep.problem("embed-shape", f"embed_tokens shape {tuple(embed_shape)} != (vocab_size, "
                    f"hidden_size) = ({cfg.vocab_size}, {cfg.hidden_size})", "embed_tokens.weight")
    if L is not None and cfg.aux_layer_ids is not None:
        bad = [i for i in cfg.aux_layer_ids if not 0 <= i <= L]
        if bad:
            rep.problem("aux-ids-range", f"aux layer ids {bad} (HF convention) out of range for a "
                        f"{L}-layer target")
