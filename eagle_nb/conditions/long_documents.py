"""Long, real, license-clean documents available offline: the Python standard library's own
documentation strings (or its source), for prompts of 128 to 4,096+ tokens (the
`context-past-training` curve, conditions/context_curve.py, and the condition's long prompts,
condition_fns.py; docs/conditions.md).

Source: the standard library of the running interpreter (CPython, Python Software Foundation
License Version 2). `kind="docs"`: for each module of `MODULES`, its docstring and then the
docstring of every public class and function it defines, in name order (`inspect.getdoc`), each
under a header line; prose, for chat targets. `kind="source"`: the module's source file; code, for
code targets. Documents are consecutive modules of `MODULES`, starting at a different module for
each document, joined until `min_chars`. The text depends only on the Python version (named by
`source_note`). Knows nothing about tokenizers.
"""
from __future__ import annotations

import importlib
import inspect
import platform

# Large, stable, pure-Python modules, in a fixed order.
MODULES = ("typing", "argparse", "logging", "subprocess", "collections", "functools", "pathlib",
           "dataclasses", "threading", "unittest.case", "json.decoder", "datetime", "textwrap",
           "inspect", "email.message", "http.client", "zipfile", "tarfile", "configparser", "csv")
KINDS = ("docs", "source")


def module_text(name: str, kind: str = "docs") -> str:
    """One module's documentation strings (`docs`) or source file (`source`)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    mod = importlib.import_module(name)
    if kind == "source":
        return inspect.getsource(mod)
    parts = [f"Module {name}\n\n{inspect.getdoc(mod) or ''}"]
    for attr in sorted(vars(mod)):
        obj = getattr(mod, attr)
        if attr.startswith("_") or getattr(obj, "__module__", None) != name:
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj):
            doc = inspect.getdoc(obj)
            if doc:
                parts.append(f"{name}.{attr}\n\n{doc}")
    return "\n\n".join(parts)


def long_documents(n: int = 1, min_chars: int = 40_000, kind: str = "docs") -> list[str]:
    """`n` documents of at least `min_chars` characters, document i starting at MODULES[i]."""
    if not 1 <= n <= len(MODULES):
        raise ValueError(f"n must be in 1..{len(MODULES)}, got {n}")
    texts = {}
    out = []
    for i in range(n):
        parts, size, j = [], 0, i
        while size < min_chars:
            name = MODULES[j % len(MODULES)]
            if j - i >= len(MODULES):
                raise ValueError(f"the {len(MODULES)} modules hold fewer than {min_chars} characters")
            if name not in texts:
                texts[name] = module_text(name, kind)
            parts.append(texts[name])
            size += len(texts[name])
            j += 1
        out.append("\n\n".join(parts))
    return out


def source_note(kind: str = "docs") -> str:
    what = "documentation strings" if kind == "docs" else "source files"
    return (f"Python {platform.python_version()} standard library {what} (modules {', '.join(MODULES[:4])}, "
            f"...), Python Software Foundation License Version 2")
