"""llama.cpp's GGUF as a checkpoint-format entry (registry.py): how a GGUF file is detected,
inspected, written from an HF directory (a stock Llama target, or a drafter in any format), and
checked by the doctor. The reading and writing are gguf_read.py's and gguf_write.py's.

The doctor's checks turn the reader's report into its check rows with the catalogue's fault
names: llama.cpp reads layer ids in the HF convention and d2t as absolute ids (gguf_format.py), so
offsets in d2t are the `d2t-absolute` fault and ids one off the EAGLE default point at
`layer-ids+1` / `layer-ids-1`. The kit does not run a GGUF drafter in its reference loop: the
doctor's measured part needs the HF checkpoint. Knows the report's fields only.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from eagle_nb.io.files import read_json_object
from eagle_nb.model.fault_names import (D2T_ABSOLUTE, FC_WIDTH_MISMATCH, LAYER_IDS_MINUS_1,
                                        LAYER_IDS_PLUS_1, LM_HEAD_MISSING)
from eagle_nb.model.layers import eagle3_layers

NAME = "gguf"


class GgufReport(dict):
    """`inspect_gguf`'s report (a plain dict) with the interface every format's report has."""

    @property
    def ok(self) -> bool:
        return bool(self["ok"])

    def as_dict(self) -> dict:
        return dict(self)

    def lines(self) -> list[str]:
        rep = dict(self)
        tensors = rep.pop("tensors")
        out = [f"{k:>22}: {v}" for k, v in rep.items()]
        out.append(f"{'tensors':>22}: {len(tensors)} (GGUF shapes, ne0 first)")
        out += [f"{'':>24}{name:<28} {shape!s:<14} {typ}" for name, (shape, typ) in tensors.items()]
        return out


def inspect(path, target_config=None) -> GgufReport:
    from eagle_nb.checkpoints.gguf_read import inspect_gguf
    return GgufReport(inspect_gguf(path, target_config))


def is_target_dir(src) -> bool:
    """An HF causal-LM directory that is not an EAGLE-3 drafter (no draft_vocab_size, > 1 layer)."""
    f = Path(src) / "config.json"
    if not f.is_file():
        return False
    c = read_json_object(f, "config")
    return ("draft_vocab_size" not in c and c.get("num_hidden_layers", 1) > 1
            and "speculators_model_type" not in c)


def write(src, dst, *, target=None, force: bool = False, fault: str | None = None, **_) -> tuple[Path, list[str]]:
    """Write a target (stock Llama) or a drafter (any format, needs `target`) as GGUF, then read the
    result back and say what llama.cpp will see. `fault` plants a named fault in a drafter."""
    from eagle_nb.checkpoints.gguf_write import write_drafter_gguf, write_target_gguf
    if is_target_dir(src):
        if fault:
            raise ValueError("--fault applies to a drafter, not to a target")
        out, role = write_target_gguf(src, dst, force=force), "target"
    else:
        out = write_drafter_gguf(src, dst, target, fault=fault, force=force)
        role = "drafter" + (f" (planted fault: {fault})" if fault else "")
    from eagle_nb.checkpoints.gguf_read import inspect_gguf
    rep = inspect_gguf(out)
    lines = [f"wrote {role} GGUF to {out} ({out.stat().st_size / 2**20:.1f} MiB, "
             f"{len(rep['tensors'])} tensors, float32)"]
    if rep["role"] == "drafter":
        lines += [f"eagle3.target_layers: {rep['target_layers']} ({rep['layer_id_convention']})",
                  f"d2t: {rep['d2t_verdict']}"]
    return out, lines + [f"problem: {p}" for p in rep["problems"]]


def check(cid, status, title, evidence, faults=(), fix="") -> tuple:
    """One check row for the doctor (`diagnosis.Check.of`'s arguments)."""
    return cid, status, title, evidence, tuple(faults), fix


def checks(path, target_cfg: dict | None) -> list[tuple]:
    """The doctor's check rows for a GGUF drafter. `target_cfg`: the target's text config, or None."""
    tc = None if target_cfg is None else SimpleNamespace(
        **{k: target_cfg.get(k) for k in ("num_hidden_layers", "hidden_size", "vocab_size")})
    from eagle_nb.checkpoints.gguf_read import inspect_gguf
    rep = inspect_gguf(path, tc if tc is not None and tc.num_hidden_layers else None)
    if rep["role"] != "drafter":
        return [check("format", "fail", "an eagle3 GGUF drafter",
                      f"architecture {rep['architecture']!r}: not an EAGLE-3 drafter ({rep['role']})")]
    out = [check("format", "pass", "an eagle3 GGUF drafter",
                 f"llama.cpp eagle3, {len(rep['tensors'])} tensors, draft vocab {rep['draft_vocab_size']}")]
    p = [x for x in rep["problems"] if x.startswith("d2t")]
    out.append(check("d2t", "fail" if p else "pass", "d2t holds absolute target ids (llama.cpp)",
                     p[0] if p else rep["d2t_verdict"], [D2T_ABSOLUTE],
                     "write d2t + arange (convert_hf_to_gguf.py does), or convert with eagle-nb convert --to gguf"))
    out.append(_aux_ids(rep.get("target_layers"), (target_cfg or {}).get("num_hidden_layers")))
    shape = [x for x in rep["problems"] if x.startswith(("fc.weight", "blk.0", "eagle3.target_hidden"))]
    out.append(check("fc-width", "fail" if shape else "pass", "fc and attention widths",
                     "; ".join(shape) or f"fc {rep['tensors'].get('fc.weight', ['?'])[0]}", [FC_WIDTH_MISMATCH]))
    voc = [x for x in rep["problems"] if "tokenizer has" in x or "tokens" in x]
    out.append(check("vocab", "fail" if voc else "pass", "vocabulary shared with the target",
                     "; ".join(voc) or f"{rep['n_tokens']} tokens"))
    head = "output.weight" in rep["tensors"]
    out.append(check("lm-head", "pass" if head else "warn", "own lm_head (output.weight)",
                     "present" if head else "absent: llama.cpp uses the target's lm_head", [LM_HEAD_MISSING]))
    seen = " ".join(c[3] for c in out)
    rest = [x for x in rep["problems"] if x not in seen]
    if rest:
        out.append(check("checkpoint", "fail", "other GGUF problems", "; ".join(rest)))
    return out


def _aux_ids(ids, L) -> tuple:
    status, faults, ev = "pass", [], f"eagle3.target_layers {ids} (HF ids: the input of target layer k)"
    if L:
        default = list(eagle3_layers(int(L)))
        if isinstance(ids, list) and any(i < 0 or i > L for i in ids):
            status, ev = "fail", ev + f": outside 0..{L} (llama.cpp aborts)"
        elif ids == [i + 1 for i in default]:
            status, faults, ev = "warn", [LAYER_IDS_PLUS_1], ev + f": the EAGLE default {default} + 1"
        elif ids == [i - 1 for i in default]:
            status, faults, ev = "warn", [LAYER_IDS_MINUS_1], ev + f": the EAGLE default {default} - 1"
        elif ids != default:
            ev += f" (EAGLE default for {L} layers: {default}; fine if the drafter was trained on these)"
    return check("aux-ids", status, "target layer ids as llama.cpp reads them", ev, faults,
                 "write the ids the drafter was trained on, in HF hidden_states convention")


def detect(path) -> bool:
    from eagle_nb.checkpoints.gguf_read import is_gguf
    return is_gguf(path)
