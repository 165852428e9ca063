"""The public façade (`eagle_nb/__init__.py`): every name it exports resolves to an object in the
module it names, so the README's quick start and the notebooks never meet a stale mapping."""
import importlib

import eagle_nb


def test_every_exported_name_resolves():
    """Each name in `eagle_nb.__all__` imports; a function or class is the one its module defines."""
    missing = []
    for name in eagle_nb.__all__:
        try:
            getattr(eagle_nb, name)
        except (ImportError, AttributeError) as e:
            missing.append(f"{name}: {e}")
    assert not missing, missing


def test_exports_point_at_the_defining_module():
    """`eagle3_layers`, `to_hf` and the checkpoint verbs come from the modules that define them."""
    for name, where in {"eagle3_layers": "model.layers", "to_hf": "model.layers",
                        "load_drafter": "checkpoints.load", "save_drafter": "checkpoints.save",
                        "inspect_checkpoint": "checkpoints.inspect", "convert": "checkpoints.convert"}.items():
        assert getattr(eagle_nb, name) is getattr(importlib.import_module(f"eagle_nb.{where}"), name)
