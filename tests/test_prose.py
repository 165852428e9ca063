"""Prose that cannot drift: every `*.py` file and every dotted name into the package that the
docstrings, docs, README and notebooks mention exists, and docs/faults.md has a row for every entry
of the fault registry.

What is checked, per file (docstrings of every .py file; every .md file; every notebook cell):
- a `*.py` path: from the repository root, the mentioning file's folder or `eagle_nb/`; a bare name
  in a package docstring must be in the same subpackage (another subpackage's module is written
  `loop/tree.py`); elsewhere a bare name must be one of the repository's own files. The peers' own
  files, cited as public sources, are listed in PEER_FILES;
- a name starting `eagle_nb.`: imports and resolves (the façade's lazy names included);
- in docstrings and markdown, `sub.module.name` (sub a subpackage, except `model`, a common variable
  name for an HF model), `module.name` (module the stem of a package module: the name must be an
  attribute of such a module or of a class defined there), and `x.Name` for a name the façade
  exports (x must then be a module that has it): so a module renamed or folded away is caught.
"""
from __future__ import annotations

import ast
import functools
import importlib
import json
import re
import subprocess
from pathlib import Path

import pytest

import eagle_nb

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "eagle_nb"

# The peers' own files, cited as public sources (docs/*.md name the project, file and version).
PEER_FILES = {
    # SafeAILab/EAGLE
    "cnets.py", "eagle/model/cnets.py", "traineagle3/cnets.py", "eagle/model/ea_model.py",
    "eagle/model/modeling_llama_kv.py", "eagle/traineagle3/main.py", "eagle/evaluation/alpha.py",
    "eagle/evaluation/gen_ea_answer_llama3chat.py", "deepspeed/runtime/engine.py",
    # sgl-project/sglang
    "llama_eagle3.py", "python/sglang/srt/models/llama_eagle3.py", "eagle_worker.py", "llama.py",
    "models/llama.py", "kimi_k25.py", "qwen2_5_vl.py", "qwen2.py", "qwen3.py", "qwen3_moe.py",
    "deepseek_v2.py", "glm4_moe_lite.py", "eagle_utils.py", "spec_utils.py", "tokenizer_manager.py",
    "scheduler_metrics_mixin.py", "logits_processor.py", "models/utils.py",
    # vllm-project/vllm
    "vllm/v1/spec_decode/eagle.py", "vllm/v1/spec_decode/metrics.py", "v1/spec_decode/metrics.py",
    "vllm/model_executor/models/llama_eagle3.py", "vllm/transformers_utils/configs/speculators/algos.py",
    "algos.py", "gpu_model_runner.py", "llama3_eagle.py", "config/speculative.py",
    "distributed/kv_transfer/kv_connector/factory.py",
    "distributed/kv_transfer/kv_connector/v1/example_hidden_states_connector.py",
    "example_hidden_states_connector.py", "entrypoints/openai/completion/protocol.py", "serving.py",
    "model_executor/models/interfaces.py", "model_executor/models/llama.py",
    "v1/core/sched/scheduler.py", "v1/kv_cache_interface.py", "v1/spec_decode/extract_hidden_states.py",
    "v1/worker/cpu_model_runner.py", "v1/worker/gpu_model_runner.py", "eagle3_utils.py",
    # vllm-project/speculators
    "src/speculators/convert/eagle/eagle3_converter.py", "eagle3_converter.py",
    "src/speculators/models/eagle3/config.py", "models/eagle3/data.py", "models/eagle3/metrics.py",
    "src/speculators/train/logger.py", "data_generation_offline.py", "core.py",
    # sgl-project/SpecForge
    "algorithms/eagle3/model.py", "algorithms/model_providers.py", "specforge/export/to_sglang.py",
    "export/to_sglang.py", "data/preprocessing.py", "train/vocab_mapping.py", "model.py", "main.py",
    "scripts/train_eagle3.py", "scripts/train_eagle3_online.py", "scripts/prepare_hidden_states.py",
    # huggingface/transformers, ggml-org/llama.cpp, pytorch-labs/gpt-fast
    "modeling_auto.py", "utils/generic.py", "convert_hf_to_gguf.py", "conversion/llama.py", "generate.py",
    # the engines' knobs and rejection samplers (docs/profile.md, docs/metrics.md, profiles/knobs.py)
    "python/sglang/srt/speculative/eagle_info.py", "python/sglang/srt/environ.py", "speculative/spec_utils.py",
    "vllm/config/speculative.py", "vllm/utils/cpu_triton_utils.py", "vllm/config/observability.py", "vllm/engine/arg_utils.py",
    "vllm/v1/metrics/stats.py", "vllm/v1/sample/rejection_sampler.py", "vllm/v1/spec_decode/utils.py",
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py", "vllm/v1/spec_decode/llm_base_proposer.py",
    "tensorrt_llm/_torch/speculative/interface.py",
    # NVIDIA Model-Optimizer (the speculation-profile schema, docs/profile.md)
    "ar_validate.py", "examples/specdec_bench/specdec_bench/speculation_profile.py", "protocol.py",
}
# Dotted names in prose that are variables of someone else's code, not our modules.
PROSE_NAMES = {"hidden_states.shape",      # SGLang's tensor (docs/drafter.md)
               "inspect.getdoc",           # the standard library's (conditions/long_documents.py)
               "vllm.entrypoints.openai.api_server",   # vLLM's server module (engines/vllm.py)
               "metrics.speculative_decoding"}         # vLLM's counter prefix (profiles/profile_engines.py)
# Files another change owns; the stale names they hold are fixed there.
KNOWN_STALE: dict[str, str] = {}
EXTENSIONS = {"json", "jsonl", "py", "md", "txt", "safetensors", "bin", "gguf", "log", "html", "ipynb",
              "toml", "yaml", "cfg", "sh", "pt", "csv", "png", "svg"}
PY_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
PKG_NAME = re.compile(r"(?<![\w.])eagle_nb(?:\.\w+)+")
SHORT_NAME = re.compile(r"(?<![\w./-])([a-z_]\w*)((?:\.\w+)+)")


def sources() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return sorted(f for f in out if Path(f).suffix in (".py", ".md", ".ipynb") and (ROOT / f).is_file()
                  and not f.startswith("tests/fixtures/"))


def texts(rel: str) -> list[tuple[bool, str]]:
    """(is prose, text): docstrings of a .py file, a markdown file, a notebook's cells."""
    path = ROOT / rel
    if path.suffix == ".md":
        return [(True, path.read_text())]
    if path.suffix == ".ipynb":
        return [(c["cell_type"] == "markdown", "".join(c["source"]))
                for c in json.loads(path.read_text())["cells"]]
    nodes = (n for n in ast.walk(ast.parse(path.read_text()))
             if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)))
    return [(True, d) for n in nodes if (d := ast.get_docstring(n, clean=False))]


@functools.cache
def own_files() -> frozenset[str]:
    return frozenset(f.name for d in ("eagle_nb", "tests", "scripts", "benchmarks")
                     for f in (ROOT / d).rglob("*.py"))


@functools.cache
def stems() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in PKG.rglob("*.py"):
        if f.name != "__init__.py":
            out.setdefault(f.stem, []).append(".".join(("eagle_nb", *f.relative_to(PKG).with_suffix("").parts)))
    for alias, mod in eagle_nb._MODULES.items():       # the façade's namespaces (`plots.`, ...)
        out.setdefault(alias, []).append(f"eagle_nb.{mod}")
    return out


@functools.cache
def resolves(dotted: str) -> bool:
    """A dotted name into the package: the longest importable prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
            break
        except ImportError:
            continue
    for name in parts[i:]:
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


@functools.cache
def has(module: str, name: str) -> bool:
    """`name` is an attribute of `module` or of a class defined in it."""
    try:
        m = importlib.import_module(module)
    except ImportError:
        return False
    return hasattr(m, name) or any(isinstance(v, type) and v.__module__ == module and hasattr(v, name)
                                   for v in vars(m).values())


def py_path_ok(rel: str, name: str) -> bool:
    src = ROOT / rel
    if name in PEER_FILES:
        return True
    if "/" in name:
        return any(p.exists() for p in (ROOT / name, src.parent / name, PKG / name))
    if src.is_relative_to(PKG):
        return (src.parent / name).exists()
    return name in own_files()


def short_name_ok(head: str, rest: str) -> bool:
    segs = rest[1:].split(".")
    name = head + rest
    subs = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()} - {"model"}
    if segs[-1] in EXTENSIONS or segs[0].isdigit() or name in PROSE_NAMES:
        return True
    if head in subs:
        return resolves(f"eagle_nb.{name}")
    if head in stems():
        return any(has(m, segs[0]) for m in stems()[head])
    if segs[0] in eagle_nb._EXPORTS and len(head) > 2 and head != "eagle_nb":
        return False          # `session.Pair`: a module that is not (or no longer) there
    return True


def unresolved(rel: str) -> list[str]:
    bad = []
    for prose, text in texts(rel):
        bad += [f"file {m}" for m in PY_PATH.findall(text) if not py_path_ok(rel, m)]
        bad += [f"name {m}" for m in PKG_NAME.findall(text) if not resolves(m)]
        if prose:
            bad += [f"name {h}{r}" for h, r in SHORT_NAME.findall(text) if h != "model"
                    and not short_name_ok(h, r)]
    return sorted(set(bad))


@pytest.mark.parametrize("rel", [pytest.param(f, marks=pytest.mark.xfail(reason=KNOWN_STALE[f], strict=False))
                                 if f in KNOWN_STALE else f for f in sources()])
def test_every_file_and_package_name_mentioned_exists(rel):
    """The `*.py` files and `eagle_nb` names this file's docstrings, text or cells mention exist."""
    assert not unresolved(rel), unresolved(rel)


def test_the_fault_page_has_a_row_for_every_registry_entry():
    """docs/faults.md's tables have one row per entry of `REGISTRY` (switchable, crash-only and
    static), each with a public report, and no row for a fault that is not registered."""
    from eagle_nb.experiment.faults import REGISTRY
    rows = {}
    for line in (ROOT / "docs" / "faults.md").read_text().splitlines():
        m = re.match(r"^\| `([\w+-]+)` \|(.*)\|(.*)\|$", line)
        if m:
            rows[m.group(1)] = m.group(3).strip()
    names = [f.name for f in REGISTRY]
    assert sorted(set(names) - set(rows)) == [] and sorted(set(rows) - set(names)) == []
    assert all(rows[n] for n in names), [n for n in names if not rows[n]]
