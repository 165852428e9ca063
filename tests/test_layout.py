"""The package's layout rules (eagle_nb/__init__.py): subpackages import only from themselves and
from the ones above them in `ORDER`, no module imports another module's private name, no import
cycles between modules, no module over 300 lines, and notebooks import only the façade. The tests
mirror the subpackages and share code only through tests/helpers.py."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "eagle_nb"
TESTS = ROOT / "tests"
ORDER = ["io", "model", "checkpoints", "loop", "recordings", "profiles", "conditions", "experiment", "engines",
         "doctor", "views", "report", "train", "cli"]


def modules() -> dict[str, Path]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = p.relative_to(PKG).with_suffix("").parts
        out[".".join(("eagle_nb", *parts)).removesuffix(".__init__")] = p
    return out


def imports_of(path: Path) -> list[tuple[str, list[str], int]]:
    """(module, imported names, line) for every `eagle_nb` import, at any depth in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("eagle_nb"):
            found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append(("." * node.level + (node.module or ""), [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, [], node.lineno) for a in node.names if a.name.startswith("eagle_nb")]
    return found


def subpackage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ORDER) else None


def test_every_subpackage_is_in_the_order_and_nothing_else_is_flat():
    """Each directory under eagle_nb/ is a listed subpackage; the only flat modules are the façade."""
    dirs = {p.name for p in PKG.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert dirs == set(ORDER)
    flat = {p.name for p in PKG.glob("*.py")}
    assert flat <= {"__init__.py", "__main__.py"}, flat


def test_imports_follow_the_order():
    """A module imports from its own subpackage or one above it; never relatively, never below."""
    bad = []
    for mod, path in modules().items():
        own = subpackage(mod)
        for target, _, line in imports_of(path):
            if target.startswith("."):
                bad.append(f"{path.relative_to(ROOT)}:{line} relative import {target}")
                continue
            sub = subpackage(target)
            if own is None or sub is None:
                continue            # the façade may import anything; anything may import a package root
            if ORDER.index(sub) > ORDER.index(own):
                bad.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {target} ({sub}, below)")
    assert not bad, "\n".join(bad)


def test_no_private_names_across_modules():
    """`from eagle_nb.io.files import _name` is a reach-in: what another module needs is public."""
    bad = [f"{p.relative_to(ROOT)}:{line} imports {n} from {m}"
           for p in [*PKG.rglob("*.py"), *ROOT.glob("tests/**/*.py")]
           for m, names, line in imports_of(p) for n in names if n.startswith("_") and n != "__version__"]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    """The module graph (top-level imports and imports inside functions alike) has no cycle."""
    mods = modules()
    graph = {m: set() for m in mods}
    for m, path in mods.items():
        for target, names, _ in imports_of(path):
            for cand in [f"{target}.{n}" for n in names] + [target]:
                if cand in mods and cand != m and not mods[cand].name == "__init__.py":
                    graph[m].add(cand)
                    break
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for n in graph[m]:
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(n):] + [n]))
            if n not in state:
                visit(n, stack + [n])
        state[m] = 2
    for m in graph:
        if m not in state:
            visit(m, [m])


@pytest.mark.parametrize("path", sorted(PKG.rglob("*.py")), ids=lambda p: str(p.relative_to(PKG)))
def test_modules_stay_short(path):
    """No module over 300 lines: one concept each."""
    assert len(path.read_text().splitlines()) <= 300


def test_notebooks_import_only_the_facade():
    """Notebook code imports `eagle_nb` names from the top-level package only."""
    bad = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            for line in "".join(cell["source"]).splitlines():
                s = line.strip()
                if (s.startswith("from eagle_nb.") or s.startswith("import eagle_nb.")):
                    bad.append(f"{nb.name}: {s}")
    assert not bad, "\n".join(bad)


def suite_files() -> list[Path]:
    """Every .py file of the suite (fixtures excepted)."""
    return sorted(p for p in TESTS.rglob("*.py") if p.relative_to(TESTS).parts[0] != "fixtures")


def test_tests_mirror_the_subpackages():
    """tests/<dir> is a subpackage name (or fixtures/) and holds test modules directly; no
    `__init__.py`, and no two test files share a basename (pytest imports them by basename, with
    tests/ on sys.path through conftest.py, so `import helpers` works from every folder)."""
    dirs = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert dirs - {"fixtures"} <= set(ORDER), sorted(dirs - {"fixtures"} - set(ORDER))
    files = suite_files()
    deep = [str(p.relative_to(TESTS)) for p in files if len(p.relative_to(TESTS).parts) > 2]
    assert not deep, deep
    assert not [p for p in files if p.name == "__init__.py"]
    names = [p.name for p in files]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


def test_no_test_module_imports_another():
    """Tests share code through tests/helpers.py only: no file of the suite imports a `test_*`
    module, or anything through the `tests.` path (that would load helpers a second time)."""
    stems = {p.stem for p in suite_files() if p.name.startswith("test_")}
    bad = []
    for p in suite_files():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = ["." * node.level + (node.module or "")]
                targets += [f"{node.module}.{a.name}" for a in node.names if node.module == "tests"]
            else:
                continue
            for target in targets:
                parts = target.split(".")
                if target.startswith(".") or parts[0] == "tests" or stems & set(parts):
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno} imports {target}")
    assert not bad, "\n".join(bad)


def test_no_file_points_outside_the_repository():
    """Docs, code and data cite public sources or the repository's own docs, never a file elsewhere."""
    import subprocess
    needle = "reference/" + "eagle3"       # split so this test does not find itself
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    assert "README.md" in files and not any(f.startswith(".venv") for f in files)
    hits = [f for f in files if Path(f).suffix in {".py", ".md", ".json", ".ipynb", ".toml", ".txt"}
            and (ROOT / f).is_file() and needle in (ROOT / f).read_text(errors="ignore")]
    assert not hits, hits


def _path_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of the string constants in a file that are not docstrings."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


@pytest.mark.parametrize("folder, forbidden", [("eagle_nb", ("tests", "scripts", "benchmarks")),
                                               ("benchmarks", ("tests",))])
def test_the_package_and_benchmarks_never_reach_into_tests(folder, forbidden):
    """The package stands alone (it never builds a path into tests/, scripts/ or benchmarks/: what
    it needs ships inside it, tests/test_wheel.py), and no benchmark reaches into tests/ (they
    use the package's builders and its one memory meter)."""
    bad = [f"{p.relative_to(ROOT)}:{line} {text!r}" for p in sorted((ROOT / folder).rglob("*.py"))
           for line, text in _path_strings(p)
           if text in forbidden or any(text.startswith(f"{f}/") for f in forbidden)]
    assert not bad, "\n".join(bad)


def _engine_literals(node, names: set[str]) -> list[str]:
    """The engine names among a node's string constants (one constant, or a tuple/list/set of them)."""
    elts = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [e.value for e in elts
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value in names]


def _is_checkpoint_format(node) -> bool:
    """`fmt` / `x.format`: a checkpoint format (checkpoints/registry.py), which shares the name
    "sglang" with the engine but is another registry's key."""
    return (isinstance(node, ast.Name) and node.id == "fmt") or (
        isinstance(node, ast.Attribute) and node.attr == "format")


def test_no_engine_name_is_compared_outside_engines():
    """An engine is one registry entry (engines/registry.py): outside engines/, no module compares
    a value with an engine's name written as a string ("vllm", "sglang", "llama.cpp", "trtllm"),
    nor indexes by one; what differs by engine is a field of its entry."""
    from eagle_nb.engines import registry
    names = set(registry.names()) | {"llama_cpp"}      # names, not labels ("vLLM" heads a table column)
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if path.relative_to(PKG).parts[0] == "engines":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_checkpoint_format(s) for s in sides):
                    continue
                hits = [h for s in sides for h in _engine_literals(s, names)]
            elif isinstance(node, ast.Subscript):
                hits = _engine_literals(node.slice, names)
            else:
                continue
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} {h!r}" for h in hits]
    assert not bad, "\n".join(bad)


def test_no_fault_name_is_written_outside_fault_names():
    """A fault's name is a string in one place, model/fault_names.py: the registry
    (experiment/faults.py) keys its entries by those constants, and every other module names a
    fault by its constant. Anywhere else in the package no string constant (docstrings aside) equals
    a registered fault's name, whether compared, indexed, listed, passed, keyed or returned; prose
    names one through an f-string of the constant. The doctor's catalogues (JSON) are data."""
    from eagle_nb.experiment import faults
    names = {f.name for f in faults.REGISTRY}
    home = PKG / "model" / "fault_names.py"
    bad = [f"{p.relative_to(ROOT)}:{line} {text!r}" for p in sorted(PKG.rglob("*.py")) if p != home
           for line, text in _path_strings(p) if text in names]
    assert not bad, "\n".join(bad)
    from eagle_nb.model import fault_names
    assert set(fault_names.NAMES) == names and len(fault_names.NAMES) == len(names)
