"""Step costs given by the user (eagle_nb/io/step_costs.py): numbers, JSON and CSV read into the same
`StepCosts`, t_verify interpolated between given draft lengths and never extrapolated, and bad files
refused with the file, row and field named."""
from __future__ import annotations

import json

import pytest

from eagle_nb.io.step_costs import (
    CostError,
    StepCosts,
    costs_from_numbers,
    read_step_costs,
    write_step_costs,
)


def test_json_and_csv_read_the_same(tmp_path):
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"unit": "ms", "costs": [
        {"batch_size": 8, "t_draft": 0.7, "t_verify": {"0": 1.1, "4": 1.5}},
        {"batch_size": 1, "t_draft": 0.6, "t_verify": 1.0}]}))
    c = tmp_path / "c.csv"
    c.write_text("batch_size,k,t_draft,t_verify\n1,,0.6,1.0\n8,0,0.7,1.1\n8,4,0.7,1.5\n")
    a, b = read_step_costs(j), read_step_costs(c)
    assert [x.batch_size for x in a] == [x.batch_size for x in b] == [1, 8]
    for x, y in zip(a, b):
        assert (x.t_draft, x.t_verify) == (y.t_draft, y.t_verify)
    assert a[0].unit == "ms"
    out = tmp_path / "again.json"
    write_step_costs(a, out)
    assert [x.t_verify for x in read_step_costs(out)] == [x.t_verify for x in a]


def test_verify_cost_is_interpolated_never_extrapolated():
    """One t_verify holds for every k; several are joined linearly; outside them is an error."""
    assert costs_from_numbers(0.5, 2.0).verify_at(7) == 2.0
    c = StepCosts(8, 0.1, {0: 1.0, 4: 3.0})
    assert c.verify_at(2) == pytest.approx(2.0) and c.t_target == 1.0
    with pytest.raises(CostError, match="k = 5 is outside"):
        c.verify_at(5)


@pytest.mark.parametrize("text, suffix, match", [
    ('{"costs": []}', ".json", "non-empty 'costs' list"),
    ('{"costs": [{"batch_size": 1, "t_draft": 0.5}]}', ".json", "batch_size, t_draft and t_verify"),
    ('{"costs": [{"batch_size": 0, "t_draft": 0.5, "t_verify": 1}]}', ".json", "batch_size must be"),
    ('{"costs": [{"batch_size": 1, "t_draft": -1, "t_verify": 1}]}', ".json", "t_draft must be"),
    ('{"costs": [{"batch_size": 1, "t_draft": 1, "t_verify": 0}]}', ".json", r"t_verify\[0\] must be"),
    ('{"costs": [{"batch_size": 1, "t_draft": 1, "t_verify": 1}, '
     '{"batch_size": 1, "t_draft": 1, "t_verify": 2}]}', ".json", r"batch_size \[1\] given twice"),
    ('{"costs": [{"batch_size": 1, "t_draft": 1, "t_verify": {"a": 1}}]}', ".json",
     "t_verify key 'a' is not a draft length"),
    ("batch_size,t_draft\n1,0.5\n", ".csv", "expected a header"),
    ("batch_size,t_draft,t_verify\n1,abc,1\n", ".csv", r"c.csv:2: .*numbers"),
    ("batch_size,k,t_draft,t_verify\n1,0,0.5,1\n1,2,0.6,1.2\n", ".csv", "t_draft 0.6 differs"),
])
def test_bad_cost_files_name_the_field(tmp_path, text, suffix, match):
    p = tmp_path / f"c{suffix}"
    p.write_text(text)
    with pytest.raises(CostError, match=match):
        read_step_costs(p)
