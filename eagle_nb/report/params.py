"""The notebooks' run parameters, checked before anything executes.

Each notebook declares its parameters in the cell tagged `parameters` (plain assignments); a
parameter given to `eagle-nb report --param` or `build_reports(params=...)` must be declared by at
least one of the notebooks being run (a misspelt name is refused with the closest known one), and
its value is checked the way the CLI checks the same flag: depth / max_new_tokens / temperature /
seed through `SpecConfig`, paths for existence, device and dtype by model/targets.py. Also refuses an
output directory that is a file or the source `notebooks/` folder. Knows nothing about executing.
"""
from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path

from eagle_nb.io.files import UserFileError, is_dir, show
from eagle_nb.model.config import ConfigError, SpecConfig


class ParamError(ValueError):
    """A notebook parameter is unknown or holds a value the notebooks cannot run with."""


def notebook_parameters(path) -> dict[str, object]:
    """{name: default} of the notebook's `parameters` cell (defaults that are not literals: None)."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    out: dict[str, object] = {}
    for cell in nb.get("cells", []):
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        try:
                            out[t.id] = ast.literal_eval(node.value)
                        except ValueError:
                            out[t.id] = None
    return out


def parse_param(text: str) -> tuple[str, str]:
    """`KEY=VALUE` from the command line."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ParamError(f"--param {text!r}: expected KEY=VALUE, e.g. --param depth=6")
    return key.strip(), value


# notebook parameter -> (SpecConfig field, is it a list of such values?)
SPEC_PARAMS = {"depth": ("depth", False), "depths": ("depth", True), "report_depths": ("depth", True),
               "max_new_tokens": ("max_new_tokens", False), "temperatures": ("temperature", True),
               "seed": ("seed", False)}


def _spec(name: str, value) -> None:
    field, is_list = SPEC_PARAMS[name]
    values = value if is_list else [value]
    if is_list and (not isinstance(value, list) or not value):
        raise ParamError(f"--param {name}: expected a non-empty list such as [2, 4], got {value!r}")
    for v in values:
        try:
            SpecConfig(**{field: v})
        except ConfigError as e:
            raise ParamError(f"--param {name}={value!r}: {e}") from None


def check_value(name: str, value) -> None:
    """Check one (coerced) parameter value; None always means the shipped default."""
    if value is None:
        return
    if name in SPEC_PARAMS:
        _spec(name, value)
    elif name == "n_prompts":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParamError(f"--param n_prompts={value!r}: expected an integer >= 1")
    elif name == "prompts_path":
        from eagle_nb.io.files import PROMPTS_CAP, check_regular
        try:
            check_regular(value, "prompt file (--param prompts_path)", PROMPTS_CAP)
        except UserFileError as e:
            raise ParamError(str(e)) from None
    elif name in ("drafter_path", "speculators_path"):
        if not isinstance(value, str) or not is_dir(value):
            raise ParamError(f"--param {name}={value!r}: no such checkpoint directory")
    elif name == "target_path":
        from eagle_nb.model.targets import resolve_target
        if not isinstance(value, str):
            raise ParamError(f"--param target_path={value!r}: expected a directory or hub id")
        resolve_target(value)
    elif name == "device":
        from eagle_nb.model.targets import pick_device
        pick_device(value)
    elif name == "dtype":
        from eagle_nb.model.targets import check_dtype
        check_dtype(value)


def check_params(params: dict, notebooks) -> None:
    """Refuse unknown names (not declared by any of `notebooks`) and bad values."""
    known: dict[str, object] = {}
    for nb in notebooks:
        known.update(notebook_parameters(nb))
    for name, value in params.items():
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ParamError(f"--param {name}: no such parameter in {[Path(n).stem for n in notebooks]}; "
                             f"{hint}known: {sorted(known)}")
        check_value(name, value)


def check_out_dir(out, notebook_dir) -> None:
    """The report directory must not be a file, nor the folder holding the source notebooks
    (their executed copies would overwrite them)."""
    out = Path(out)
    if out.exists() and not is_dir(out):
        raise ParamError(f"--out {show(out)} is a file; give a directory for the reports")
    if out.resolve() == Path(notebook_dir).resolve():
        raise ParamError(f"--out {show(out)} is the source notebooks folder; the executed copies would "
                         f"overwrite the notebooks. Choose another directory (default: reports)")
