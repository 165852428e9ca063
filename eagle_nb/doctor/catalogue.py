"""The fault catalogue as a measured table: every switchable fault of the registry (faults.FAULTS) run
on a pair at depth k, greedy and T = 1, beside the healthy pair, plus the crash-only faults with the
exact error text (engines/crashes.py), and which static check of the doctor sees each one (each entry's
`static`); then every serving condition of its registry (conditions/registry.py) run the same way,
each cell with a 95% interval for tau (tau +- 1.96 bootstrap standard errors over prompts,
ranking.profile_from_stats). The measuring loop is the doctor's (measure.py).

`python -m eagle_nb.doctor.catalogue [--out FILE.json] [--markdown]` regenerates it on the shipped pair;
docs/catalogue.md is generated from the JSON (scripts/catalogue_table.py). Knows nothing about plotting.
"""
from __future__ import annotations

import argparse
import json
import time

from eagle_nb.conditions import registry as C
from eagle_nb.engines import crashes
from eagle_nb.doctor.measure import first_line, measure_profiles
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.faults import HEALTHY


def shipped_path():
    from eagle_nb.io.paths import FAULT_CATALOGUE
    return FAULT_CATALOGUE


def load(path=None) -> dict:
    """A catalogue written by `--out` (default: the one measured on the shipped pair)."""
    with open(path or shipped_path()) as f:
        return json.load(f)


def of_pair(target=None, drafter=None) -> tuple[dict, str]:
    """(the catalogue measured on the shipped pair `target` / `drafter` belong to, its pair's name);
    for a pair that is not shipped, the default pair's, named as such (nothing was measured on it)."""
    from eagle_nb.io.paths import SHIPPED, pair_for
    pf = pair_for(target, drafter)
    if pf is None:
        return load(), f"{SHIPPED.name} (the default pair: no catalogue was measured on yours)"
    return load(pf.catalogue), pf.name


def frame(cat: dict):
    """The catalogue as a pandas DataFrame: one row per fault, τ and per-position per temperature."""
    import pandas as pd
    rows = []
    for r in cat["rows"]:
        row = {"fault": r["fault"], "kind": r["kind"], "static check": r["static_check"] or "no"}
        for t in cat["setup"]["temperatures"]:
            res = r["results"].get(str(float(t)))
            row[f"tau T={t}"] = None if not res else round(res["tau"], 2)
            row[f"per-position T={t}"] = None if not res else " / ".join(f"{x:.2f}" for x in res["per_position"])
        row["note"] = r.get("error_text") or (f"n/a: {r['not_applicable']}" if r["not_applicable"] else "")
        rows.append(row)
    return pd.DataFrame(rows)


def conditions_frame(cat: dict, temperature: float = 0.0):
    """The catalogue's serving conditions as a pandas DataFrame beside its healthy row: τ, its 95%
    interval, the change from healthy and the per-position acceptance at `temperature`, or why the
    condition does not apply to the pair."""
    import pandas as pd
    t = str(float(temperature))
    base = next(r for r in cat["rows"] if r["fault"] == HEALTHY)["results"].get(t)
    rows = [{"condition": HEALTHY, "family": "", "result": base, "note": ""}]
    rows += [{"condition": r["condition"], "family": r["family"], "result": r["results"].get(t),
              "note": f"not applicable: {r['not_applicable']}" if r["not_applicable"] else ""}
             for r in cat.get("conditions") or []]
    out = []
    for r in rows:
        res = r.pop("result")
        lo, hi = interval(res) if res and "tau_se" in res else (None, None)
        out.append({**r, "tau": None if not res else round(res["tau"], 3),
                    "95% interval": "" if lo is None else f"[{lo:.2f}, {hi:.2f}]",
                    "vs healthy": None if not (res and base) else round(res["tau"] - base["tau"], 3),
                    "per-position": "" if not res else " / ".join(f"{x:.2f}" for x in res["per_position"])})
    cols = ["condition", "family", "tau", "95% interval", "vs healthy", "per-position", "note"]
    return pd.DataFrame(out)[cols].set_index("condition")


def condition_taus(cat: dict, temperature: float = 0.0) -> dict:
    """{'healthy' and each condition: its τ at `temperature`, None where it was not measured}."""
    t = str(float(temperature))
    rows = [(HEALTHY, next(r for r in cat["rows"] if r["fault"] == HEALTHY)["results"])]
    rows += [(r["condition"], r["results"]) for r in cat.get("conditions") or []]
    return {n: res[t]["tau"] if t in res else None for n, res in rows}


def row(f, results: dict | None = None, not_applicable: str | None = None) -> dict:
    """The catalogue row of registry entry `f` (None: healthy) with its measured `results`
    ({temperature: Profile}); a crash-only entry carries its error text instead."""
    name = HEALTHY if f is None else f.name
    out = {"fault": name, "kind": "switch" if f is None else f.kind,
           "story": "" if f is None else f.story, "reference": "" if f is None else f.reference,
           "fix": "" if f is None else f.fix,
           "switch": "Setting()" if f is None else f"Setting(faults=({name!r},))",
           "static_check": None if f is None else f.static.text}
    if f is not None and f.kind == F.CRASH:
        out.update(switch=f"crashes.reproduce({name!r})", error_text=crashes.reproduce(name))
    out["results"] = {str(T): {"tau": p.tau, "tau_se": p.tau_se, "per_position": list(p.per_position)}
                      for T, p in (results or {}).items()}
    out["not_applicable"] = not_applicable
    return out


def condition_row(c, results: dict | None = None, not_applicable: str | None = None) -> dict:
    """The catalogue row of condition entry `c` with its measured `results` ({temperature: Profile})."""
    return {"condition": c.name, "family": c.family, "story": c.story, "reference": c.reference,
            "fix": c.fix, "switch": f"Setting(conditions=({c.name!r},))", "signature": c.signature,
            "check": c.check,
            "results": {str(T): {"tau": p.tau, "tau_se": p.tau_se, "per_position": list(p.per_position)}
                        for T, p in (results or {}).items()},
            "not_applicable": not_applicable}


def measure(pair=None, prompts=None, *, depth: int = 4, temperatures=(0.0, 1.0),
            max_new_tokens: int = 64, faults=None, conditions=None, progress: bool = True) -> dict:
    """{'rows': [...], 'conditions': [...], 'setup': {...}}: one row per fault (and 'healthy'),
    then one per serving condition, with τ and per-position acceptance per temperature, or why the
    entry does not apply to this pair. `faults` and `conditions` limit the registry entries
    measured (names; default all)."""
    from eagle_nb.experiment.pair import Pair, shipped_prompts
    pair = pair or Pair()
    prompts = list(prompts or shipped_prompts())
    t0 = time.perf_counter()
    entries = [f for f in F.FAULTS if faults is None or f.name in faults]
    conds = [c for c in C.REGISTRY if conditions is None or c.name in conditions]
    measured, errors = measure_profiles(pair, prompts, [f.name for f in entries + conds], depth=depth,
                                        temperatures=temperatures, max_new_tokens=max_new_tokens,
                                        catch=ValueError, raise_for=(), desc="catalogue",
                                        leave=True, progress=progress)
    rows = [row(f, measured[n], first_line(errors[n]) if n in errors else None)
            for f, n in [(None, HEALTHY), *[(f, f.name) for f in entries]]]
    rows += [row(f) for f in F.of_kind(F.CRASH)]
    crows = [condition_row(c, measured[c.name], first_line(errors[c.name]) if c.name in errors else None)
             for c in conds]
    from eagle_nb.io.paths import DATA_DIR
    drafter = str(pair.drafter_path).replace(str(DATA_DIR.parent) + "/", "")   # repo-relative
    setup = {"target": pair.target_path or "shipped", "drafter": drafter, "depth": depth,
             "temperatures": list(temperatures), "prompts": len(prompts),
             "max_new_tokens": max_new_tokens, "seconds": round(time.perf_counter() - t0, 1),
             "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    return {"setup": setup, "rows": rows, "conditions": crows}


def machine() -> str:
    """The CPU (or GPU) the catalogue was measured on, in one line."""
    import os
    import platform

    import torch
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return (f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch "
            f"threads, torch {torch.__version__}")


def add_conditions(cat: dict, pair=None, prompts=None, *, progress: bool = True) -> dict:
    """`cat` (a measured catalogue) with its 'conditions' rows measured again for every condition of
    the registry, on the same pair and workload as its setup says; the healthy pair is measured
    again too and the setup's note says whether it came out identical to the catalogue's row."""
    from eagle_nb.experiment.pair import Pair, shipped_prompts
    s = cat["setup"]
    pair = pair or Pair()
    prompts = list(prompts or shipped_prompts(s["prompts"]))
    t0 = time.perf_counter()
    fresh = measure(pair, prompts, depth=s["depth"], temperatures=tuple(s["temperatures"]),
                    max_new_tokens=s["max_new_tokens"], faults=(), progress=progress)
    same = fresh["rows"][0]["results"] == next(r for r in cat["rows"] if r["fault"] == HEALTHY)["results"]
    note = (f"serving conditions measured in a separate run ({time.perf_counter() - t0:.0f} s, same "
            f"settings; healthy {'identical' if same else 'NOT identical: compare with care'})")
    cat = {**cat, "conditions": fresh["conditions"]}
    cat["setup"] = {**s, "note": "; ".join(n for n in (s.get("note"), note) if n)}
    return cat


def interval(res: dict) -> tuple[float, float]:
    """95% interval for tau: tau +- 1.96 bootstrap standard errors over prompts."""
    return res["tau"] - 1.96 * res["tau_se"], res["tau"] + 1.96 * res["tau_se"]


def _interval_cell(res: dict | None) -> str:
    if not res:
        return "–"
    lo, hi = interval(res)
    per = " / ".join(f"{x:.2f}" for x in res["per_position"])
    return f"{res['tau']:.2f} [{lo:.2f}, {hi:.2f}] ({per})"


def conditions_markdown(cat: dict) -> str:
    """The serving conditions' table: τ [95% interval] (per-position) per temperature, the
    doctor's signature. Empty when the catalogue measured no condition."""
    rows = cat.get("conditions") or []
    if not rows:
        return ""
    temps = [str(float(t)) for t in cat["setup"]["temperatures"]]
    head = ["condition", "story (reference)", *[f"τ [95% interval] (per-position) T={t}" for t in temps],
            "signature"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        story = f"{r['story']} ({r['reference']})"
        cells = ([f"n/a on this pair: {r['not_applicable']}"] + [""] * (len(temps) - 1)
                 if r["not_applicable"] else [_interval_cell(r["results"].get(t)) for t in temps])
        lines.append("| " + " | ".join([f"`{r['condition']}`", story.replace("|", "/"), *cells,
                                        r["signature"].replace("|", "/")]) + " |")
    return "\n".join(lines)


def markdown(cat: dict) -> str:
    s = cat["setup"]
    temps = [str(float(t)) for t in s["temperatures"]]
    head = ["fault", "story (reference)", *[f"τ [95% interval] (per-position) T={t}" for t in temps],
            "static check"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in cat["rows"]:
        story = r["story"] + (f" ({r['reference']})" if r["reference"] else "")
        if r["kind"] == "crash":
            cells = [f"crash: `{r['error_text']}`"] + [""] * (len(temps) - 1)
        elif r["not_applicable"]:
            cells = [f"n/a on this pair: {r['not_applicable']}"] + [""] * (len(temps) - 1)
        else:
            cells = [_interval_cell(r["results"].get(t)) for t in temps]
        lines.append("| " + " | ".join([f"`{r['fault']}`", story.replace("|", "/"), *cells,
                                        (r["static_check"] or "no").replace("|", "/")]) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m eagle_nb.doctor.catalogue", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="write the measured catalogue as JSON here")
    ap.add_argument("--markdown", action="store_true", help="print the table docs/catalogue.md shows")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--n-prompts", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--temperatures", default="0,1", help="comma-separated (T > 0 runs the live "
                    "loop: on the real pair, hours on a CPU)")
    ap.add_argument("--conditions-into", metavar="FILE.json", default=None,
                    help="measure only the serving conditions (and healthy, to compare) on the "
                         "setup FILE.json records, and write them into it")
    a = ap.parse_args(argv)
    if a.conditions_into:
        cat = add_conditions(load(a.conditions_into))
        with open(a.conditions_into, "w") as f:
            json.dump(cat, f, indent=1)
        print(conditions_markdown(cat))
        return
    from eagle_nb.experiment.pair import shipped_prompts
    temps = tuple(float(t) for t in a.temperatures.split(",") if t.strip())
    cat = measure(prompts=shipped_prompts(a.n_prompts), depth=a.depth, temperatures=temps,
                  max_new_tokens=a.max_new_tokens)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(cat, f, indent=1)
    print(markdown(cat) + "\n\n" + conditions_markdown(cat) if a.markdown else json.dumps(cat, indent=1))


if __name__ == "__main__":
    main()
