"""Hugging Face hub ids, resolved from the local cache only (nothing is ever downloaded): the one
place that decides whether a string names a hub repository and where its cached snapshot is.
`model.targets.resolve_target` (loading) and `io.target_parts` (lazy reading) both use it.
Knows nothing about what the files mean.
"""
from __future__ import annotations

import os
from pathlib import Path


def looks_like_hub_id(name) -> bool:
    """'org/name': one slash, not a relative or absolute path, no spaces."""
    s = str(name)
    return s.count("/") == 1 and not s.startswith((".", "/", "~")) and " " not in s


def cached_snapshot(name) -> Path | None:
    """The local snapshot directory of hub id `name` if its config.json is in the local Hugging
    Face cache, else None (not a hub id, or not cached)."""
    if not looks_like_hub_id(name):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
        cached = try_to_load_from_cache(str(name), "config.json")
    except Exception:  # noqa: BLE001 - an invalid repo id is simply not cached
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def cache_dir() -> str:
    """Where the cache is looked for, for messages."""
    return os.environ.get("HF_HUB_CACHE") or os.environ.get("HF_HOME") or "~/.cache/huggingface"
