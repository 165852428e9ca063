"""The catalogue's serving conditions as a table and a figure (doctor/catalogue.py
`conditions_frame`, `condition_taus`; views/doctor_plots.py `plot_condition_catalogue`), on the
code pair's generated catalogue: healthy first, a condition the pair cannot run has no τ and
no bar, every measured one a bar with its interval."""
from __future__ import annotations

from eagle_nb.doctor import catalogue
from eagle_nb.io.paths import CODE
from eagle_nb.views.doctor_plots import plot_condition_catalogue
from helpers import legibility_problems


def test_conditions_table_and_figure():
    cat = catalogue.load(CODE.catalogue)
    f = catalogue.conditions_frame(cat)
    taus = catalogue.condition_taus(cat)
    assert list(f.index)[0] == "healthy" and list(f.index) == list(taus)
    na = [r["condition"] for r in cat["conditions"] if r["not_applicable"]]
    assert na and all(taus[n] is None and f.loc[n, "note"].startswith("not applicable") for n in na)
    measured = [n for n, t in taus.items() if t is not None]
    assert all(abs(f.loc[n, "tau"] - round(taus[n], 3)) < 1e-9 for n in measured)
    fig = plot_condition_catalogue(f, title="code pair")
    bars, lines = fig.axes[0].patches, fig.axes[1].get_lines()
    assert len(bars) == len(measured) == len(lines)
    assert legibility_problems(fig) == []
