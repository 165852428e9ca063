"""`eagle-nb` (or `python -m eagle_nb`): the dispatcher. Each command is a module of this package
(capture, inspect, convert, speculate, profile, tune, record, report, engine, doctor) with
`add_parser(subparsers)`, which writes its options and their help, and `run(args) -> exit status`.
Options several commands share, the help formatter and the parser that suggests close matches are
in `cli/options.py`.

Every argument is parsed and checked before a command runs, and no command module imports torch
or transformers at the top: a bad flag is refused in a fraction of a second
(tests/cli/test_cli_fast.py). No algorithm lives here.
"""
from __future__ import annotations

import argparse
import sys

from eagle_nb.cli import (
    capture,
    convert,
    doctor,
    engine,
    inspect,
    options,
    profile,
    record,
    report,
    speculate,
    tune,
)

COMMANDS = (capture, inspect, convert, speculate, profile, tune, record, report, engine,
            doctor)   # --help order

DESCRIPTION = """\
eagle-nb: find out why an EAGLE-3 drafter accepts almost nothing in serving.

The commands below, one line each. Without paths, a command uses the target and drafter shipped
with the kit. Nothing is downloaded; quiet unless --verbose."""

EPILOG = """\
examples:
  eagle-nb doctor --drafter /models/drafter --target /models/target --observed sglang.log
  eagle-nb inspect /models/drafter --target /models/target
  eagle-nb convert /models/drafter /tmp/d --to sglang
  eagle-nb capture --prompt "def f(x):" --layers eagle3
  eagle-nb speculate --prompt "def f(x):" --depth 4 --ablate fc-bypass
  eagle-nb record --prompt "def f(x):" --out /tmp/rec --layers all --final-hidden
  eagle-nb engine log vllm.log
  eagle-nb report --out reports

Run `eagle-nb COMMAND --help` for a command's options."""


def build_parser() -> argparse.ArgumentParser:
    """The whole `eagle-nb` parser: each command module adds its own subcommand."""
    ap = options.Parser(prog="eagle-nb", description=DESCRIPTION, epilog=EPILOG,
                        formatter_class=lambda prog: options.Formatter(prog, max_help_position=16))
    sub = ap.add_subparsers(dest="cmd", required=True)
    for module in COMMANDS:
        p = module.add_parser(sub)
        options.verbose(p)
        p.set_defaults(run=module.run)
    return ap


def quiet() -> None:
    """No library progress bars or advisory warnings (model loading); our own progress stays."""
    import os
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"      # read by transformers at import
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


def main(argv=None) -> None:
    a, extra = build_parser().parse_known_args(argv)
    if extra:
        a.command_parser.unrecognized(extra)
    if not a.verbose:
        quiet()
    try:
        sys.exit(a.run(a))
    except (ValueError, OSError) as e:   # the package's errors name the fault and fix
        print(f"eagle-nb {a.cmd}: error: {e}", file=sys.stderr)
        sys.exit(2)
