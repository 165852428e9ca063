"""`eagle-nb` (or `python -m eagle_nb`): the dispatcher. Each command is a module of this package
(capture, inspect, convert, speculate, profile, tune, record, report, engine, doctor) with
`add_parser(subparsers)`, which writes its options and their help, and `run(args) -> exit status`.
Options several commands share, and the help formatter, are in `cli/options.py`. No algorithm
lives here.
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

Captures the target's hidden states, inspects and converts drafter checkpoints between the EAGLE,
SGLang/SpecForge and vLLM/speculators formats, runs the draft-verify-accept loop with every
acceptance metric the engines print (healthy, or with a named fault switched on), and renders
the investigation notebooks as HTML reports. Without paths, every command uses the small trained
target and drafter shipped in data/. Nothing is downloaded; quiet unless --verbose."""

EPILOG = """\
examples:
  eagle-nb capture --prompt "def f(x):" --layers eagle3
  eagle-nb inspect data/drafter_speculators
  eagle-nb convert data/drafter_speculators /tmp/d --to sglang
  eagle-nb speculate --prompts data/eval_prompts.jsonl --depth 4
  eagle-nb speculate --prompts data/eval_prompts.jsonl --ablate fc-bypass
  eagle-nb report --out reports

Run `eagle-nb COMMAND --help` for a command's options."""


def build_parser() -> argparse.ArgumentParser:
    """The whole `eagle-nb` parser: each command module adds its own subcommand."""
    ap = argparse.ArgumentParser(prog="eagle-nb", description=DESCRIPTION, epilog=EPILOG,
                                 formatter_class=options.Formatter)
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
    a = build_parser().parse_args(argv)
    if not a.verbose:
        quiet()
    try:
        sys.exit(a.run(a))
    except (ValueError, OSError) as e:   # the package's errors name the fault and fix
        print(f"eagle-nb {a.cmd}: error: {e}", file=sys.stderr)
        sys.exit(2)
