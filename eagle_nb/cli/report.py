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
    return p


def run(a) -> int:
    from eagle_nb.report.build import build_reports
    from eagle_nb.report.params import parse_param
    params = dict(parse_param(p) for p in a.param)
    index = build_reports(a.out, params=params, notebooks=a.notebook or None, verbose=a.verbose)
    print(f"reports written; open {index}")
    return 0
