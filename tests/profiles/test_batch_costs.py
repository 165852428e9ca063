"""Step costs measured on the local pair at several batch sizes (eagle_nb/profiles/batch_costs.py):
one StepCosts per batch size, with the target-only step (k = 0), the verify at each k and the
drafter step, all positive times that `tune` accepts."""
from __future__ import annotations

from eagle_nb.profiles.batch_costs import measure_step_costs
from eagle_nb.profiles.tune import tune
from helpers import code_pair, code_prompts


def test_measured_costs_feed_tune():
    pair = code_pair(device="cpu")
    ids = pair.encode(code_prompts(1)[0])
    costs = measure_step_costs(pair, ids, batch_sizes=(1, 4), ks=(1, 3), reps=2)
    assert [c.batch_size for c in costs] == [1, 4]
    for c in costs:
        assert sorted(c.t_verify) == [0, 1, 3] and c.t_draft > 0
        assert all(v > 0 for v in c.t_verify.values())
        assert c.source.startswith("measured here")
    t = tune([0.9, 0.8, 0.7], costs)
    assert set(t.best) == {1, 4} and len(t.rows) == 6
