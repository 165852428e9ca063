"""What `eagle-nb --help` says, checked without running a command: each option's help is written once,
beside the option (no table applied afterwards), every option and command is documented, defaults
are shown where there is one, and a fault name is never broken across lines.

In process and CPU only: builds the parser, parses nothing but --help.
"""
from __future__ import annotations

import argparse
import ast
import re

import pytest

from eagle_nb.cli import main as cli_main
from eagle_nb.experiment.faults import FAULTS
from eagle_nb.io.paths import REPO_ROOT

CLI = REPO_ROOT / "eagle_nb" / "cli"


def _help(capsys, *args) -> str:
    with pytest.raises(SystemExit) as e:
        cli_main.main([*args, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def _parsers(parser=None, path=()):
    """(command path, parser) of the top-level parser and every command and subcommand."""
    parser = parser or cli_main.build_parser()
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _option_help(text: str, flag: str) -> str:
    """The help text printed for `flag` in a command's --help, joined onto one line."""
    body = text.split("\noptions:\n")[1].split("\nexamples:\n")[0]
    m = re.search(rf"^  (?:-\w, )?{re.escape(flag)}(?: [A-Z_,.]+)?(.*(?:\n {{10,}}.*)*)", body, re.MULTILINE)
    assert m, (flag, body)
    return " ".join(m.group(1).split())


def test_each_option_help_is_written_once_beside_the_option():
    """Every `add_argument` and `add_parser` call in eagle_nb/cli passes its help text itself (not
    a command module's `add_parser(subparsers)`, which makes those calls), and
    no code sets a help, description or epilog afterwards or reaches into argparse's private state
    (the old help table overwrote `action.help` through `parser._actions`)."""
    bad = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    node.func.attr == "add_argument" or        # argparse's add_parser(name, ...),
                    node.func.attr == "add_parser" and len(node.args) + len(node.keywords) > 1):
                helps = [k for k in node.keywords if k.arg == "help"]
                if len(helps) != 1:
                    bad.append(f"{where}: {node.func.attr} with {len(helps)} help=")
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                bad += [f"{where}: assigns .{t.attr}" for t in targets if isinstance(t, ast.Attribute)
                        and t.attr in ("help", "description", "epilog", "formatter_class")]
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not \
                    node.attr.startswith("__") and not (isinstance(node.value, ast.Call)
                                                        and getattr(node.value.func, "id", "") == "super"):
                bad.append(f"{where}: reaches into .{node.attr}")
    assert not bad, "\n".join(bad)


def test_every_command_and_option_is_documented():
    """Every command and subcommand has a description and examples; every option and positional
    argument has a help text of at least three words; each flag appears once per command."""
    for path, parser in _parsers():
        if path:
            assert parser.description and parser.epilog.startswith("examples:\n  eagle-nb "), path
        flags = [s for a in parser._actions for s in a.option_strings]
        assert len(flags) == len(set(flags)), path
        for action in parser._actions:
            if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction)):
                continue
            assert action.help and len(action.help.split()) >= 3, (path, action.dest, action.help)


def test_doctor_help_says_drafter_is_required_and_shows_depth_default(capsys):
    """`doctor --help`: --drafter is required (not in brackets in the usage) and claims no default;
    --depth says what it defaults to; defaults that exist are shown (--n-prompts: all shipped
    prompts at T=0, by the one pass; 8 at T > 0; a sample of 64 from a larger workload)."""
    text = _help(capsys, "doctor")
    usage = " ".join(text.split("\n\n")[0].split())
    assert " --drafter DRAFTER " in usage and "[--drafter" not in usage
    assert "default" not in _option_help(text, "--drafter")
    assert "(default: the one the engine's log or metrics show, else 4)" in _option_help(text, "--depth")
    from eagle_nb.conditions.workload_summary import SAMPLE      # the help's number is the sample's
    assert _option_help(text, "--n-prompts").endswith("(default: all at T=0, measured by the one "
                                                      "pass; 8 at T > 0, the live loop; at most "
                                                      f"{SAMPLE} of a --prompts file)")
    assert _option_help(text, "--static-only") == "skip the reference-loop measurements"


def test_defaults_are_shown_by_the_formatter_and_only_when_real(capsys):
    """A default is printed as argparse gives it, never for None/off/empty (no '(default: None)'),
    and help that states its own default is not given a second one."""
    for path, parser in _parsers():
        text = parser.format_help()
        assert "(default: None)" not in text and "(default: False)" not in text, path
        assert "(default: [])" not in text and not re.search(r"\(default[^)]*\)\s*\(default", text), path
    spec = _help(capsys, "speculate")
    assert _option_help(spec, "--max-new-tokens") == "new tokens generated per prompt (default: 32)"
    assert _option_help(spec, "--topk").endswith("(default: 1)")
    assert _option_help(_help(capsys, "record"), "--out") == "recording directory to write"


@pytest.mark.parametrize("columns", ["60", "100", "160"])
def test_fault_names_are_never_broken_in_help(capsys, monkeypatch, columns):
    """`--ablate` lists every fault of the registry, each whole on one line whatever the terminal
    width (hyphenated names are not split at their hyphens)."""
    monkeypatch.setenv("COLUMNS", columns)
    for cmd in (["speculate"], ["engine", "compare"]):
        text = _help(capsys, *cmd)
        for f in FAULTS:
            assert re.search(rf"(^|[\s:,]){re.escape(f.name)}(,|$)", text, re.MULTILINE), (cmd, columns, f.name)


def test_help_names_only_paths_that_exist_and_the_shipped_defaults():
    """Every repository path a help text or example names (data/...) exists, and the --target /
    --drafter defaults name the shipped pair's paths (io/paths.py), so no help names a stale default."""
    from eagle_nb.cli.options import shown
    from eagle_nb.io.paths import SHIPPED_DRAFTER, SHIPPED_TARGET
    for path, parser in _parsers():
        text = parser.format_help()
        for p in re.findall(r"(?<![\w/.])data/[\w./-]*\w", text):
            assert (REPO_ROOT / p).exists(), (path, p)
        for flag, want in (("--target", shown(SHIPPED_TARGET)), ("--drafter", shown(SHIPPED_DRAFTER))):
            if f"  {flag} " in text and "(default: the shipped" in text:
                h = _option_help(text, flag)
                assert "default" not in h or want in h, (path, flag, h)


def test_without_prompt_flags_a_command_takes_its_pairs_prompts():
    """No --chat/--prompt/--prompts: the shipped prompts of the pair --target or --drafter belongs
    to (the code pair's code prompts for its files), else the default pair's chat requests."""
    from argparse import Namespace

    from eagle_nb.cli.options import prompt_list
    from eagle_nb.io.paths import CODE, SHIPPED
    from eagle_nb.io.prompts import read_prompts
    none = dict(chat=None, prompt=None, prompts=None)
    assert prompt_list(Namespace(**none, target=str(CODE.target), drafter=None)) == read_prompts(CODE.prompts)
    assert prompt_list(Namespace(**none, target=None, drafter=str(CODE.drafter))) == read_prompts(CODE.prompts)
    assert prompt_list(Namespace(**none, target="/elsewhere/model", drafter=None)) == read_prompts(SHIPPED.prompts)
    assert read_prompts(CODE.prompts) != read_prompts(SHIPPED.prompts)
