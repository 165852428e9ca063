"""Values a notebook hands to its report: `report_value(name, value)` inside a notebook,
`read_values(nb)` on the executed notebook (build.py, tests). Knows nothing about executing or HTML.
"""

from __future__ import annotations

import json

RECORD_MIME = "application/vnd.eagle-nb.record+json"


# -- recording results from inside a notebook -------------------------------------------------------
def report_value(name: str, value) -> None:
    """Display `value` under `name` so that `build_reports` (and tests) can read it back from the
    executed notebook. `value` must be JSON-serialisable."""
    from IPython.display import display
    text = json.dumps(value, default=str)
    shown = json.dumps(_rounded(json.loads(text)), ensure_ascii=False)
    if len(shown) > 240:        # never cut mid-value: say where the whole record is
        shown = f"{len(value) if hasattr(value, '__len__') else 1} entries (results.json, index.html)"
    display({RECORD_MIME: {name: json.loads(text)}, "text/plain": f"recorded {name} = {shown}"},
            raw=True)


def _rounded(v):
    """Floats rounded to 3 decimals, through dicts and lists (for display only)."""
    if isinstance(v, float):
        return round(v, 3)
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def workload_text(w: dict) -> str:
    """'8 prompts × 32 new tokens, k=4, T=0, seed 0' from a recorded workload."""
    ks = w["depths"]
    k = f"k={ks[0]}" if len(ks) == 1 else f"k={min(ks)}..{max(ks)}"
    T = "/".join(f"{t:g}" for t in w["temperatures"])
    return f"{w['prompts']} prompts × {w['max_new_tokens']} new tokens, {k}, T={T}, seed {w['seed']}"


def report_workload(n_prompts: int, max_new_tokens: int, depths, temperatures=(0.0,), seed: int = 0):
    """Print and record what a notebook's numbers were measured on, so every report states its
    workload next to its numbers (a tau measured on 8 x 32 differs from one on 16 x 64)."""
    w = {"prompts": int(n_prompts), "max_new_tokens": int(max_new_tokens),
         "depths": [int(k) for k in depths], "temperatures": [float(t) for t in temperatures],
         "seed": int(seed)}
    print(f"workload: {workload_text(w)}")
    report_value("workload", w)


def read_values(nb) -> dict:
    """Every value `record`ed in an executed notebook (nbformat node), by name."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if RECORD_MIME in data:
                out.update(data[RECORD_MIME])
    return out
