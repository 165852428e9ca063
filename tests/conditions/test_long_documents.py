"""Long documents from the standard library (eagle_nb.conditions.long_documents): deterministic, long
enough, starting at a different module each, named with their license."""
from __future__ import annotations

import pytest

from eagle_nb.conditions.long_documents import MODULES, long_documents, module_text, source_note


def test_documents_are_long_distinct_and_deterministic():
    """Two documents of >= 30k characters, the first opening with typing's docs, the second with
    argparse's; building again gives the same text; `source` gives code."""
    a, b = long_documents(2, min_chars=30_000)
    assert len(a) >= 30_000 and len(b) >= 30_000 and a != b
    assert a.startswith("Module typing") and b.startswith("Module argparse")
    assert long_documents(2, min_chars=30_000) == [a, b]
    assert "def " in long_documents(1, min_chars=1000, kind="source")[0]
    assert "argparse.ArgumentParser\n\n" in module_text("argparse")


def test_bad_requests_are_refused():
    """An unknown kind, a count outside 1..len(MODULES), more text than the modules hold."""
    with pytest.raises(ValueError, match="kind"):
        module_text("json", "html")
    with pytest.raises(ValueError, match="n must be"):
        long_documents(len(MODULES) + 1)
    with pytest.raises(ValueError, match="fewer than"):
        long_documents(1, min_chars=10**9)
    assert "Python Software Foundation License" in source_note()
