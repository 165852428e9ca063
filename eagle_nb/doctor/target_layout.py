"""The doctor's target-layout check: is the target a text decoder whose layers engine-style capture
finds at `model.layers`, or a multimodal wrapper whose engine class must hand its language model's
aux states to the drafter?

Decided from the config as data (model/architectures.py): the table of known architectures first,
then the weight names on disk, then, for a class transformers ships, the class built on the meta
device. A target directory that holds only the embedding and the head (the usual case for a target
too large to run here) is therefore judged by its architecture, not by missing layer weights, and
a wrapper's warning names the engine classes and releases to check. Knows nothing about drafters.
"""
from __future__ import annotations

import json
from pathlib import Path

from eagle_nb.doctor.diagnosis import Check
from eagle_nb.engines.registry import target_needs
from eagle_nb.model.architectures import layers_from_keys, layers_on_meta, lookup, serving_notes
from eagle_nb.model.fault_names import WRAPPER_CAPTURE

TITLE = "target decoder layout"
TEXT_PATHS = ("model.layers", "layers")


def _raw_config(tmeta) -> dict:
    f = Path(str(tmeta.source)) / "config.json"
    try:
        return json.loads(f.read_text()) if f.is_file() else {}
    except (OSError, ValueError):
        return {}


def layout_check(tmeta) -> Check:
    """pass (text decoder at `model.layers`), warn 'wrapper-capture' (a multimodal wrapper, or layers
    nested elsewhere), or skip (no way to tell without running the checkpoint's code)."""
    if tmeta is None:
        return Check("target-layout", "skip", TITLE, "no target")
    archs = list(tmeta.architectures or [])
    arch = lookup({"architectures": archs})
    on_disk = layers_from_keys(tmeta.weight_keys)
    disk = f"weights here: {f'layers under {on_disk!r}' if on_disk else 'no decoder-layer tensors'}"
    if arch is not None:
        where, how = arch.layers, f"known {arch.kind}"
    elif on_disk is not None:
        where, how = on_disk, "from the weight names"
    else:
        where, how = layers_on_meta(_raw_config(tmeta))
    ev = f"architectures {archs}; decoder layers at {where!r} ({how}); {disk}"
    nested = arch is None and where is not None and where not in TEXT_PATHS
    if arch is not None and arch.wrapper or nested:
        return Check("target-layout", "warn", TITLE, ev + ": a multimodal wrapper around a language "
                     "model; capture code that looks for `model.layers` finds nothing and hands over "
                     "the final hidden state unless the engine's class for this architecture passes "
                     "the language model's aux states on. " + "; ".join(serving_notes(arch, target_needs())),
                     [WRAPPER_CAPTURE], "serve with an engine release whose class for this "
                     "architecture passes the aux states (see the evidence); on the serving side the "
                     "drafter's input must be n_aux x Ht wide, not Ht (docs/faults.md)")
    if where is None:
        return Check("target-layout", "skip", TITLE, ev + ": cannot tell where the decoder layers are "
                     "without running the checkpoint's own code")
    return Check("target-layout", "pass", TITLE, ev + ": a text decoder; engine-style capture "
                 "(`model.layers`) finds them")
