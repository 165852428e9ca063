"""Serving conditions run on the code pair (experiment/condition_runs.py, notebook 07): the healthy
pair and each condition at every depth, a condition the pair cannot run named with why instead of
stopping the others, and the table a row per name asked."""
from __future__ import annotations

import pytest

from eagle_nb.experiment.condition_runs import condition_sweep
from helpers import code_pair, code_prompts


@pytest.fixture(scope="module")
def swept():
    return condition_sweep(code_pair(device="cpu"), code_prompts(8),
                           ["template-system-prompt", "vocabulary-coverage"], depths=(2, 4),
                           max_new_tokens=16)


def test_a_condition_the_pair_cannot_run_is_named_not_raised(swept):
    """The code target has no chat template: the system-prompt mode is refused with the registry's
    reason; the vocabulary cut runs at both depths and accepts less than healthy."""
    assert list(swept.not_applicable) == ["template-system-prompt"]
    assert "chat template" in swept.not_applicable["template-system-prompt"]
    assert swept.names == ["healthy", "vocabulary-coverage"] and swept.sweep.depths == [2, 4]
    taus = swept.taus(4)
    assert taus["vocabulary-coverage"] < taus["healthy"]
    assert set(swept.seconds) == {"healthy", "template-system-prompt", "vocabulary-coverage"}


def test_the_table_has_a_row_per_name_asked(swept):
    f = swept.frame(4)
    assert list(f.index) == ["healthy", "vocabulary-coverage", "template-system-prompt"]
    assert f.loc["healthy", "vs healthy"] == 0 and f.loc["template-system-prompt", "note"].startswith("not applicable")
    assert len(f.loc["healthy", "per-position"].split(" / ")) == 4
