"""Where the kit's own files are: the repository root, the shipped models and prompts.

One place for every path the package derives from its own location; nothing else looks at
`__file__` to find the repository.
"""
from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA_DIR = REPO_ROOT / "data"
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
SHIPPED_TARGET = DATA_DIR / "target"
SHIPPED_DRAFTER = DATA_DIR / "drafter_eagle"
SHIPPED_DRAFTER_SPECULATORS = DATA_DIR / "drafter_speculators"
SHIPPED_PROMPTS = DATA_DIR / "eval_prompts.jsonl"
FAULT_CATALOGUE = DATA_DIR / "fault_catalogue.json"
