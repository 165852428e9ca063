"""The reports' `index.html`: the fault story on one page.

From the rows `report.build.build_reports` collects per executed notebook (title, goal, status, time,
recorded values, figures of cells tagged `index-figure`) it writes: the fault-cost figure with a
table of τ per fault and depth whose cells link to that state of the precomputed panel (URL
fragments such as `03_fc_bypass_ablation.html#fault=fc-bypass&depth=4`), then one row per notebook
with its workload next to its numbers. Numbers are rounded (at most 3 decimals), goals are
rendered from markdown, nothing is loaded from the network.

Knows the names notebooks record (`workload`, `precomputed_tau`, `fault_cost_tau`); knows nothing
about models.
"""
from __future__ import annotations

import html
import re
import time
from pathlib import Path

from eagle_nb.experiment.faults import HEALTHY
from eagle_nb.views.switcher import state_key

ABLATION_REPORT = "03_fc_bypass_ablation"

_CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#263238;line-height:1.4}
table{border-collapse:collapse;margin:4px 0}td,th{border:1px solid #cfd8dc;padding:3px 8px;vertical-align:top}
th{background:#eceff1}.error{color:#c62828}.ok{color:#2e7d32}code{font-size:90%}
td.num{text-align:right;font-variant-numeric:tabular-nums}.small{font-size:90%;color:#455a64}
img{max-width:100%}table.rec td,table.rec th{font-size:90%;padding:2px 6px}"""


def fmt(v) -> str:
    """A recorded value as short text: floats with at most 3 decimals, bools as yes/no."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1e4 else f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return ", ".join(fmt(x) for x in v)
    return str(v)


def markdown(text: str) -> str:
    """Inline markdown (code, bold, italics) to HTML, escaped first."""
    s = html.escape(text)
    s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
    s = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", s)
    return re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", s)


def value_html(v) -> str:
    """A recorded value as HTML: a dict of dicts as a 2-D table, a dict as a key/value table."""
    if isinstance(v, dict) and v and all(isinstance(x, dict) for x in v.values()):
        cols = list(dict.fromkeys(c for x in v.values() for c in x))
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
        body = "".join(f"<tr><th>{html.escape(str(r))}</th>" + "".join(
            f"<td class='num'>{html.escape(fmt(x.get(c, '')))}</td>" for c in cols) + "</tr>"
            for r, x in v.items())
        return f"<table class='rec'><tr><th></th>{head}</tr>{body}</table>"
    if isinstance(v, dict):
        return "<table class='rec'>" + "".join(
            f"<tr><th>{html.escape(str(k))}</th><td class='num'>{html.escape(fmt(x))}</td></tr>"
            for k, x in v.items()) + "</table>"
    return html.escape(fmt(v))


def workload_of(rec: dict) -> str:
    from eagle_nb.report.values import workload_text
    return workload_text(rec["workload"]) if "workload" in rec else "—"


def fault_table(row: dict) -> str:
    """τ per fault (rows) and depth (columns) from the 03 report's precomputed panel; every cell
    links to that state of the panel."""
    pre = row["records"].get("precomputed_tau") or {}
    grid: dict = {}
    for key, tau in pre.items():
        m = re.match(r"(.+), k=(\d+)$", key)
        if m:
            grid.setdefault(m.group(1), {})[int(m.group(2))] = tau
    if not grid:
        return ""
    ks = sorted({k for c in grid.values() for k in c})
    mid = ks[len(ks) // 2]          # healthy first, then the costliest fault first
    grid = dict(sorted(grid.items(), key=lambda kv: (kv[0] != HEALTHY, kv[1].get(mid, 0.0))))
    head = "".join(f"<th>τ at k={k}</th>" for k in ks)
    body = []
    for fault, c in grid.items():
        cells = "".join(
            f"<td class='num'><a href='{html.escape(row['html'])}#"
            f"{html.escape(state_key({'fault': fault, 'depth': k}))}'>{c[k]:.2f}</a></td>"
            if k in c else "<td></td>" for k in ks)
        body.append(f"<tr><th>{html.escape(fault)}</th>{cells}</tr>")
    return (f"<table><tr><th>setting</th>{head}</tr>{''.join(body)}</table>"
            f"<p class='small'>Each number opens that state of the precomputed panel in the "
            f"{html.escape(ABLATION_REPORT)} report.</p>")


def story(rows: list[dict]) -> str:
    """The fault-cost figure and the linked τ table, from the ablation report's row."""
    row = next((r for r in rows if r["name"] == ABLATION_REPORT and r["error"] is None), None)
    if row is None:
        return ""
    figs = "".join(f"<img alt='which fault costs how much' src='data:image/png;base64,{png}'/>"
                   for png in row.get("figures", []))
    return (f"<h2>Which fault costs how much</h2><p>Every named fault, one at a time, against the "
            f"healthy pipeline on the shipped pair (workload: {html.escape(workload_of(row['records']))}). "
            f"τ = 1 means the drafter adds nothing.</p>{figs}{fault_table(row)}")


def write_index(out_dir: Path, rows: list[dict], params: dict, total_s: float) -> Path:
    """index.html: the fault story, then one row per notebook (title, goal, status, time,
    workload, recorded results as small tables)."""
    trs = []
    for r in rows:
        rec = {k: v for k, v in r["records"].items() if k not in ("workload", "precomputed_tau")}
        results = "".join(f"<div><b>{html.escape(k.replace('_', ' '))}</b> {value_html(v)}</div>"
                          for k, v in rec.items())
        if "precomputed_tau" in r["records"]:
            results += "<div class='small'>precomputed panel: see the table above</div>"
        status = "ok" if r["error"] is None else f"error: {r['error']}"
        trs.append(f"<tr><td><a href='{html.escape(r['html'])}'>{html.escape(r['title'] or r['name'])}"
                   f"</a><br><small>{markdown(r['goal'])}</small></td>"
                   f"<td class='{'ok' if r['error'] is None else 'error'}'>{html.escape(status)}</td>"
                   f"<td>{r['seconds']:.1f} s</td><td>{html.escape(workload_of(r['records']))}</td>"
                   f"<td>{results}</td><td><a href='{html.escape(r['ipynb'])}'>ipynb</a></td></tr>")
    ptxt = ("notebook defaults (the shipped pair)" if not params else
            ", ".join(f"<code>{html.escape(k)}={html.escape(fmt(v))}</code>" for k, v in params.items()))
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>eagle_nb reports</title>"
            f"<style>{_CSS}</style></head><body><h1>eagle_nb investigation reports</h1>"
            f"<p>Built {time.strftime('%Y-%m-%d %H:%M:%S')}; total execution {total_s:.1f} s. "
            f"Parameters: {ptxt}</p>{story(rows)}<h2>Reports</h2>"
            "<table><tr><th>notebook</th><th>status</th><th>execution time</th><th>workload</th>"
            f"<th>recorded results</th><th>executed</th></tr>{''.join(trs)}</table></body></html>")
    path = Path(out_dir) / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
