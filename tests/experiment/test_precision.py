"""A quantized target behind the code pair's drafter (experiment/precision.py): the pair view runs
the quantized copy and leaves the pair alone; int4 moves the aux states and the target's top-1
further than int8, and the report carries both taus."""
from __future__ import annotations

import pytest

from eagle_nb.experiment.precision import compare_precision, quantized_pair
from eagle_nb.experiment.setting import Setting
from helpers import code_pair, code_prompts

NEW = 24


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def test_quantized_pair_is_a_view_with_its_own_target(pair):
    """The view shares drafter and tokenizer, holds a different target object, and its results
    are its own: the pair's cached result is unchanged by running the view."""
    prompts = code_prompts(2)
    s = Setting(depth=3, max_new_tokens=NEW)
    ref = pair.run(prompts, s, progress=False)
    q = quantized_pair(pair, 4)
    assert q.drafter is pair.drafter and q.tokenizer is pair.tokenizer and q.target is not pair.target
    assert "int4" in q.target_path and q.quant_info.group_size == 32
    res = q.run(prompts, s, progress=False)
    assert res.wiring["target"] == q.target_path
    assert pair.run(prompts, s, progress=False) is ref


def test_int4_moves_states_and_decisions_more_than_int8(pair):
    """Over 4 prompts: aux cosine int8 > int4 > 0.98 at every captured layer, top-1 agreement
    int8 >= int4, and each report names its precision and has both taus."""
    prompts = code_prompts(4)
    r8 = compare_precision(pair, prompts, bits=8, depth=4, max_new_tokens=NEW)
    r4 = compare_precision(pair, prompts, bits=4, depth=4, max_new_tokens=NEW)
    assert set(r8.aux_cosine) == set(int(i) for i in pair.layer_ids)
    for k in r8.aux_cosine:
        assert r8.aux_cosine[k] > r4.aux_cosine[k] > 0.98
    assert r8.top1_agreement >= r4.top1_agreement and r4.positions == 4 * NEW
    assert r8.tau_reference == r4.tau_reference and 1 <= r4.tau_quantized <= 5
    assert "int4" in r4.report_lines()[0] and r4.as_dict()["depth"] == 4
