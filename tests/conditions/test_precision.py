"""A quantized target behind the code pair's drafter (conditions/precision.py and the
`target-quantized*` conditions): the condition runs the quantized copy and leaves the pair's own
results alone; int4 moves the aux states and the target's top-1 further than int8, and the report
carries both taus."""
from __future__ import annotations

import pytest

from eagle_nb.conditions.precision import compare_precision, scheme_of
from eagle_nb.experiment.setting import Setting
from helpers import code_pair, code_prompts

NEW = 24


@pytest.fixture(scope="module")
def pair():
    return code_pair(device="cpu")


def test_the_condition_runs_a_quantized_copy_and_leaves_the_pair_alone(pair):
    """Under `target-quantized` the wiring's target is another object (int4, groups of 32), the
    drafter is the pair's, the result names the condition, and the pair's healthy result is
    unchanged by running it."""
    prompts = code_prompts(2)
    s = Setting(depth=3, max_new_tokens=NEW)
    ref = pair.run(prompts, s, progress=False)
    q = Setting(depth=3, max_new_tokens=NEW, conditions=("target-quantized",))
    w = pair.wiring(q)
    assert w.target is not pair.target and w.drafter is pair.drafter
    assert any("int4" in n and "groups of 32" in n for n in w.notes)
    res = pair.run(prompts, q, progress=False)
    assert res.setting.label == "target-quantized"
    assert pair.run(prompts, s, progress=False) is ref
    assert scheme_of("target-quantized-int8") == "int8" and scheme_of("target-quantized-q4_1") == "q4_1"
    with pytest.raises(ValueError, match="does not quantize"):
        scheme_of("template-raw")


def test_int4_moves_states_and_decisions_more_than_int8(pair):
    """Over 4 prompts: aux cosine int8 > int4 > 0.98 at every captured layer, top-1 agreement
    int8 >= int4, and each report names its precision and has both taus."""
    prompts = code_prompts(4)
    r8 = compare_precision(pair, prompts, "target-quantized-int8", depth=4, max_new_tokens=NEW)
    r4 = compare_precision(pair, prompts, "target-quantized", depth=4, max_new_tokens=NEW)
    assert set(r8.aux_cosine) == set(int(i) for i in pair.layer_ids)
    for k in r8.aux_cosine:
        assert r8.aux_cosine[k] > r4.aux_cosine[k] > 0.98
    assert r8.top1_agreement >= r4.top1_agreement and r4.positions == 4 * NEW
    assert r8.tau_reference == r4.tau_reference and 1 <= r4.tau_quantized <= 5
    assert "int4" in r4.report_lines()[0] and r4.as_dict()["depth"] == 4
