"""The doctor's workload phase (between static and measure), when a prompt file was given: the
user's requests, as sent, read and summarised (`conditions.workload_summary`), before anything
runs. (Prompts given as a Python list are measured as given, as before: no workload.)

A prompt file is read, sampled (at most `--n-prompts`, default SAMPLE, a seeded sample
in file order), encoded as sent with the target's tokenizer (no weights loaded) for the context
lengths, and summarised: template use, lengths against the target's and the drafter's limits
(requests that do not fit the target named and left out), and the conditions the requests make
worth measuring. Those join the conditions asked for, and the measure phase runs the pair on the
healthy forms of the requests (as the drafter was trained to see them) and under each of them;
it also adds coverage and loop share of the healthy run (`Workload.add_run`). A recording
(`--features`) holds one served run: its prompts are kept, no condition is chosen. Knows files,
the tokenizer and configs; runs no model.
"""
from __future__ import annotations

import sys
from pathlib import Path

from eagle_nb.conditions import workload_summary as W
from eagle_nb.conditions.templates import template_kind
from eagle_nb.conditions.workload import split_rows
from eagle_nb.io.prompts import read_prompt_rows
from eagle_nb.model.limits import encode


def workload(st) -> None:
    """Fill `workload`; unless a recording is measured, replace `prompts` by the sampled requests'
    healthy forms and add the workload's conditions to `conditions`."""
    if not isinstance(st.prompts, (str, Path)):     # the shipped prompts, or a list: measured as given
        return
    rows, source = read_prompt_rows(st.prompts), str(st.prompts)
    idx = W.sample_indices(len(rows), st.n_prompts)
    prompts, labels = split_rows([rows[i] for i in idx])
    tok, why = tokenizer(st)
    lengths = [encode(tok, p, where=f"request {i + 1}").shape[-1] for i, p in zip(idx, prompts)] if tok else None
    target_cfg, drafter_cfg = configs(st)
    w, keep, healthy = W.summarize(prompts, template_kind(tok) if tok else "unknown", requests=len(rows),
                                   source=source, numbers=[i + 1 for i in idx], labels=labels,
                                   lengths=lengths, new_tokens=st.max_new_tokens, depth=st.k,
                                   target_cfg=target_cfg, drafter_cfg=drafter_cfg)
    if why:
        w.warnings.append(f"the target's tokenizer was not read ({why}): no lengths, no template conditions")
    st.workload, st.workload_keep = w, keep
    if st.recorded:
        w.warnings.append("a recording holds one served run: its prompts are measured, the workload's "
                          f"conditions ({', '.join(w.conditions) or 'none'}) are not")
        w.conditions = {}
    else:
        st.prompts, st.n_prompts = healthy, len(healthy)
        st.conditions = tuple(dict.fromkeys([*st.conditions, *w.conditions]))
    plan = (f"plan: workload: {len(healthy)} of {len(rows):,} requests of {source} to measure"
            + (f"; beside the faults: {', '.join(w.conditions)}" if w.conditions else ""))
    st.notes.append(plan)
    if st.progress:
        print(plan, file=sys.stderr, flush=True)


def tokenizer(st):
    """(the target's tokenizer, None), or (None, why it could not be read)."""
    if st.pair is not None:
        tok = st.pair.tokenizer
        return tok, None if tok is not None else "the pair has no tokenizer files"
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(str(st.target_path), local_files_only=True,
                                             trust_remote_code=st.trust_remote_code), None
    except (OSError, ValueError) as e:
        return None, f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"


def configs(st) -> tuple:
    """(target config, drafter config) for the context limits: the loaded pair's, else the files'
    (None where one cannot be read: a GGUF drafter, a target without config.json)."""
    from eagle_nb.checkpoints.detect import read_config
    from eagle_nb.io.target_parts import read_text_config
    from eagle_nb.model.limits import text_config
    loaded = getattr(st.pair, "target", None)
    if hasattr(loaded, "config"):
        target = text_config(loaded)
    else:
        try:
            target = read_text_config(st.target_path).raw
        except (OSError, ValueError):
            target = None
    if st.pair is not None:
        return target, st.pair.drafter.config
    try:
        return target, read_config(Path(st.drafter)) if Path(st.drafter).is_dir() else None
    except (OSError, ValueError):
        return target, None
