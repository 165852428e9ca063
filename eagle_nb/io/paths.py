"""Where the kit's own files are: the repository root, the shipped pairs and their prompts.

One place for every path the package derives from its own location; nothing else looks at
`__file__` to find the repository. Two pairs ship:

- the **real pair** (`SHIPPED`, the default everywhere): SmolLM2-135M-Instruct, set up by
  `make install` into the ignored cache folder (train/smollm2.py), and the EAGLE-3 drafter the kit
  trained for it (`data/drafter_eagle`, format A; `make install` writes its format-C copy);
- the **code pair** (`CODE`): a 4.7M-parameter code model and its drafter, trained here, kept in
  `data/code_pair/` for the fast unit tests.

A pair's measured fault catalogue is package data (`eagle_nb/doctor/catalogues/`, shipped in the
wheel): the doctor ranks by it even where the repository is not, e.g. for a target that cannot run
here, from an installed package.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = PACKAGE_DIR.parent
CATALOGUES = PACKAGE_DIR / "doctor" / "catalogues"
DATA_DIR = REPO_ROOT / "data"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
# Written by benchmarks/vllm_tune.py (the real pair on vLLM's CPU engine, throughput by draft length,
# measured on this project's machine); notebook 04 plots it.
ENGINE_TUNE_RECORD = DATA_DIR / "vllm_cpu_throughput.json"
# Set up by `make install`, never committed: $EAGLE_NB_CACHE or <repo>/.cache.
CACHE_DIR = Path(os.environ.get("EAGLE_NB_CACHE") or REPO_ROOT / ".cache")
SHIPPED_GGUF = CACHE_DIR / "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclass(frozen=True)
class PairFiles:
    """The files of one shipped pair."""
    name: str
    target: Path
    drafter: Path                    # format A (SafeAILab EAGLE)
    drafter_speculators: Path        # format C (speculators), the same weights
    prompts: Path                    # evaluation prompts (JSON lines)
    catalogue: Path                  # the fault catalogue measured on this pair (package data)
    drafter_metrics: Path            # what the kit's trainer wrote
    train_log: Path | None = None    # the trainer's log, in SafeAILab EAGLE's line format
    target_gguf: Path | None = None  # the quantized file the target was dequantized from


REAL = PairFiles("SmolLM2-135M-Instruct + eagle_nb drafter",
                 target=CACHE_DIR / "SmolLM2-135M-Instruct",
                 drafter=DATA_DIR / "drafter_eagle",
                 drafter_speculators=CACHE_DIR / "drafter_speculators",
                 prompts=DATA_DIR / "eval_prompts.jsonl",
                 catalogue=CATALOGUES / "smollm2.json",
                 drafter_metrics=DATA_DIR / "drafter_metrics.json",
                 train_log=DATA_DIR / "drafter_train.log",
                 target_gguf=SHIPPED_GGUF)
CODE_DIR = DATA_DIR / "code_pair"
CODE = PairFiles("code pair (4.7M-parameter code model)",
                 target=CODE_DIR / "target",
                 drafter=CODE_DIR / "drafter_eagle",
                 drafter_speculators=CODE_DIR / "drafter_speculators",
                 prompts=CODE_DIR / "eval_prompts.jsonl",
                 catalogue=CATALOGUES / "code_pair.json",
                 drafter_metrics=CODE_DIR / "drafter_metrics.json")



class ShippedFileMissing(FileNotFoundError):
    """A file of a shipped pair is not where the package looks for it; the message says why (an
    installed package without its repository checkout, or a clone before `make install`)."""


def shipped(path: Path, what: str = "the shipped pair") -> Path:
    """`path` (a file or folder of a shipped pair) if it is there, else ShippedFileMissing naming
    it and the step that puts it there."""
    path = Path(path)
    if path.exists():
        return path
    if not (REPO_ROOT / "pyproject.toml").is_file():
        why = (f"eagle_nb is installed without its repository checkout ({PACKAGE_DIR}), and the "
               f"shipped pairs live in the checkout: clone the repository and run `make install` "
               f"there, or pass your own paths (--target, --drafter, --prompts)")
    elif path.is_relative_to(CACHE_DIR):
        why = f"it is set up by `make install` in {REPO_ROOT} (fetched, checked and converted into {CACHE_DIR})"
    else:
        why = f"it is committed in the repository: restore it (git checkout -- {path.relative_to(REPO_ROOT)})"
    raise ShippedFileMissing(f"{path}: {what} is not there; {why}")


def pair_of(drafter=None) -> PairFiles:
    """The shipped pair whose drafter `drafter` is (its format-A or format-C folder; None: the
    default pair). ValueError naming the folder when it is not a shipped drafter."""
    pf = pair_for(drafter=drafter)
    if pf is None or Path(drafter or pf.drafter).resolve() == pf.target.resolve():
        raise ValueError(f"{drafter} is not a shipped drafter ({REAL.drafter}, {CODE.drafter}): the kit "
                         f"knows no training record for it; pass its own training log")
    return pf


def pair_for(target=None, drafter=None) -> PairFiles | None:
    """The shipped pair a target or drafter path belongs to (the drafter in either format), so that
    a command given one half of a shipped pair takes the other half and the pair's prompts from
    it; the default pair when both are None; None when neither is a shipped file."""
    if target is None and drafter is None:
        return SHIPPED
    given = [Path(x).resolve() for x in (target, drafter) if isinstance(x, (str, Path))]
    for pf in (REAL, CODE):
        mine = {pf.target.resolve(), pf.drafter.resolve(), pf.drafter_speculators.resolve()}
        if any(g in mine for g in given):
            return pf
    return None


def shipped_halves(target=None, drafter=None, speculators_path=None):
    """(pair files or None, target, drafter, speculators path) with a shipped pair's missing half
    taken from the given one (pair_for), the default pair's drafter otherwise; the format-C copy
    only for the pair's own drafter."""
    files = pair_for(target, drafter)
    if target is None and files is not None:
        target = shipped(files.target, "the shipped target")
    if drafter is None:
        drafter = shipped(files.drafter if files else SHIPPED.drafter, "the shipped drafter")
    if speculators_path is None and files and Path(drafter).resolve() == files.drafter.resolve():
        speculators_path = files.drafter_speculators
    return files, target, drafter, speculators_path


SHIPPED = REAL     # the default of every command, notebook and report
SHIPPED_TARGET = SHIPPED.target
SHIPPED_DRAFTER = SHIPPED.drafter
SHIPPED_DRAFTER_SPECULATORS = SHIPPED.drafter_speculators
SHIPPED_PROMPTS = SHIPPED.prompts
FAULT_CATALOGUE = SHIPPED.catalogue
REAL_TARGET = REAL.target
CODE_TARGET, CODE_DRAFTER, CODE_DRAFTER_SPECULATORS, CODE_PROMPTS = (
    CODE.target, CODE.drafter, CODE.drafter_speculators, CODE.prompts)
