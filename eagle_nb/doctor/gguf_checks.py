"""The doctor's static checks on a llama.cpp GGUF drafter: the GGUF reader's report
(`checkpoints/gguf_read.py`) turned into `diagnosis.Check`s with the catalogue's fault names.
llama.cpp reads layer ids in the HF convention and d2t as absolute ids (`checkpoints/gguf_format.py`), so
offsets in d2t are the `d2t-absolute` fault and ids one off the EAGLE default point at
`layer-ids+1` / `layer-ids-1`. The kit does not run a GGUF drafter in its reference loop: the
doctor's dynamic part needs the HF checkpoint. Knows the report's fields only.
"""
from __future__ import annotations

from types import SimpleNamespace

from eagle_nb.doctor.diagnosis import Check


def _ck(cid, status, title, evidence, faults=(), fix=""):
    return Check(cid, status, title, evidence, list(faults) if status in ("warn", "fail") else [], fix)


def gguf_checks(path, target_cfg: dict | None) -> tuple[list[Check], dict]:
    """(checks, the reader's report). `target_cfg`: the target's text config as a dict, or None."""
    from eagle_nb.checkpoints.gguf_read import inspect_gguf
    from eagle_nb.model.layers import eagle3_layers
    tc = None if target_cfg is None else SimpleNamespace(
        **{k: target_cfg.get(k) for k in ("num_hidden_layers", "hidden_size", "vocab_size")})
    rep = inspect_gguf(path, tc if tc is not None and tc.num_hidden_layers else None)
    checks = []
    if rep["role"] != "drafter":
        checks.append(_ck("format", "fail", "an eagle3 GGUF drafter",
                          f"architecture {rep['architecture']!r}: not an EAGLE-3 drafter ({rep['role']})"))
        return checks, rep
    checks.append(_ck("format", "pass", "an eagle3 GGUF drafter",
                      f"llama.cpp eagle3, {len(rep['tensors'])} tensors, draft vocab {rep['draft_vocab_size']}"))
    p = [x for x in rep["problems"] if x.startswith("d2t")]
    checks.append(_ck("d2t", "fail" if p else "pass", "d2t holds absolute target ids (llama.cpp)",
                      p[0] if p else rep["d2t_verdict"], ["d2t-absolute"],
                      "write d2t + arange (convert_hf_to_gguf.py does), or convert with eagle-nb convert --to gguf"))
    ids = rep.get("target_layers")
    L = (target_cfg or {}).get("num_hidden_layers")
    status, faults, ev = "pass", [], f"eagle3.target_layers {ids} (HF ids: the input of target layer k)"
    if L:
        default = list(eagle3_layers(int(L)))
        if isinstance(ids, list) and any(i < 0 or i > L for i in ids):
            status, ev = "fail", ev + f": outside 0..{L} (llama.cpp aborts)"
        elif ids == [i + 1 for i in default]:
            status, faults, ev = "warn", ["layer-ids+1"], ev + f": the EAGLE default {default} + 1"
        elif ids == [i - 1 for i in default]:
            status, faults, ev = "warn", ["layer-ids-1"], ev + f": the EAGLE default {default} - 1"
        elif ids != default:
            ev += f" (EAGLE default for {L} layers: {default}; fine if the drafter was trained on these)"
    checks.append(_ck("aux-ids", status, "target layer ids as llama.cpp reads them", ev, faults,
                      "write the ids the drafter was trained on, in HF hidden_states convention"))
    shape = [x for x in rep["problems"] if x.startswith(("fc.weight", "blk.0", "eagle3.target_hidden"))]
    checks.append(_ck("fc-width", "fail" if shape else "pass", "fc and attention widths",
                      "; ".join(shape) or f"fc {rep['tensors'].get('fc.weight', ['?'])[0]}", ["fc-width-mismatch"]))
    voc = [x for x in rep["problems"] if "tokenizer has" in x or "tokens" in x]
    checks.append(_ck("vocab", "fail" if voc else "pass", "vocabulary shared with the target",
                      "; ".join(voc) or f"{rep['n_tokens']} tokens"))
    head = "output.weight" in rep["tensors"]
    checks.append(_ck("lm-head", "pass" if head else "warn", "own lm_head (output.weight)",
                      "present" if head else "absent: llama.cpp uses the target's lm_head", ["lm-head-missing"]))
    seen = " ".join(c.evidence for c in checks)
    rest = [x for x in rep["problems"] if x not in seen]
    if rest:
        checks.append(_ck("checkpoint", "fail", "other GGUF problems", "; ".join(rest)))
    return checks, rep
