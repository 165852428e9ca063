"""`eagle_nb.plots`: the namespace the notebooks, panels and reports use for figures and tables of
speculation results (`plots.plot_acceptance(results)`).

It only gathers names; each is defined once, by what it draws:
- `views.acceptance`: per-position acceptance, n-alpha, tau vs depth, what each fault costs;
- `views.traces`: one prompt's draft-vs-target grid;
- `views.tables`: metrics, tau per depth, engine log lines, a trace as text;
- `views.palette`: the kit's colours, sizes and figure helpers (PNG and data-URI output).
"""
from __future__ import annotations

from eagle_nb.views.acceptance import (
    MIN_TRIED,
    REFERENCE_N_ALPHA,
    REFERENCE_TAU_VS_K,
    plot_acceptance,
    plot_depth_overview,
    plot_fault_cost,
    plot_per_position,
    plot_tau_vs_depth,
)
from eagle_nb.views.palette import (
    color,
    fault_color,
    figure_to_data_uri,
    figure_to_png,
    line_style,
    new_axes,
    new_figure,
    png_data_uri,
    style_axes,
    token_text,
)
from eagle_nb.views.tables import log_lines, metrics_table, tau_table, trace_table
from eagle_nb.views.traces import plot_trace

__all__ = [
    "MIN_TRIED", "REFERENCE_N_ALPHA", "REFERENCE_TAU_VS_K", "color", "fault_color", "figure_to_data_uri",
    "figure_to_png", "line_style", "log_lines", "metrics_table", "new_axes", "new_figure",
    "plot_acceptance", "plot_depth_overview", "plot_fault_cost", "plot_per_position",
    "plot_tau_vs_depth", "plot_trace", "png_data_uri", "style_axes", "tau_table", "token_text",
    "trace_table",
]
