"""`eagle-nb report`: execute the investigation notebooks and write self-contained HTML reports and
an index page. Parses flags, calls `report.build.build_reports`, prints where the index is."""
from __future__ import annotations

from eagle_nb.cli import options


def add_parser(sub):
    p = options.command(
        sub, "report", help="execute the notebooks and render HTML reports",
        description="execute the notebooks and write self-contained HTML reports and index.html",
        examples="""\
            eagle-nb report --out reports
            eagle-nb report --out r --notebook 03 --param n_prompts=16 --param max_new_tokens=64""")
    p.add_argument("--out", default="reports",
                   help="output directory for the HTML reports, executed notebooks and results.json")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="notebook parameter override (repeatable), e.g. n_prompts=16 or "
                        "target_path=/models/x")
    p.add_argument("--notebook", action="append", default=[],
                   help="only these notebooks (repeatable): a path, a stem or a prefix such as 03")
    p.add_argument("--jobs", type=int, default=None,
                   help="notebooks executed at once, each in its own kernel (default: 2 on two "
                        "cores or more, one thread per kernel; 1 runs them one after another)")
    return p


def run(a) -> int:
    from eagle_nb.report.execute import list_notebooks, resolve_params
    from eagle_nb.report.params import check_params, parse_param
    params = dict(parse_param(p) for p in a.param)
    if a.jobs is not None and a.jobs < 1:
        raise ValueError(f"--jobs {a.jobs}: give 1 or more")
    # names and values checked before the report machinery (matplotlib, torch) loads
    check_params(resolve_params(params), list_notebooks(a.notebook or None))
    from eagle_nb.report.build import build_reports
    index = build_reports(a.out, params=params, notebooks=a.notebook or None, verbose=a.verbose,
                          jobs=a.jobs)
    print(f"reports written; open {index}")
    return 0
