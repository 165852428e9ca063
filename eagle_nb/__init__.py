"""eagle_nb: see why an EAGLE-3 drafter fails in serving (capture, drafter, checkpoints, speculation).

The names below are imported lazily so that `python -m eagle_nb.train` and the CLI start fast.
"""
from importlib import import_module

# NOTE: `eagle_nb.capture` is both a module and its entry-point function. Binding the function here,
# after the submodule is loaded, makes `eagle_nb.capture(model, ids)` the context manager.
from .capture import capture  # noqa: E402
from .doctor import doctor  # noqa: E402  (same trick: `eagle_nb.doctor(...)` is the function)

_EXPORTS = {
    "eagle3_layers": "capture", "to_hf": "capture", "from_hf": "capture",
    "CapturedStates": "capture",
    "Eagle3Drafter": "drafter", "DrafterConfig": "config", "SpecConfig": "config",
    "load_drafter": "checkpoints", "save_drafter": "checkpoints", "inspect_checkpoint": "checkpoints",
    "convert": "checkpoints", "load_target": "targets", "make_wrapper": "targets",
    "generate": "speculate", "greedy_reference": "speculate", "SpecStats": "speculate",
    "acceptance_metrics": "metrics", "Setting": "setting", "Pair": "session", "FAULTS": "faults",
    "TargetParts": "target_parts", "read_text_config": "target_parts", "Recording": "recording",
    "generate_tree": "tree",
}
__all__ = ["capture", *_EXPORTS]


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'eagle_nb' has no attribute {name!r}")
