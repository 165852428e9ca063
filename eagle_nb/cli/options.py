"""What the `eagle-nb` commands share: the help formatter, the options several commands take (each
written once here, with its help beside it), and the small checks of their values.

A command module (`cli/capture.py`, ...) calls `command(...)` for its parser and these adders for
the shared options; options of its own it adds itself, help beside them. Defaults are shown by the
formatter (argparse's ArgumentDefaultsHelpFormatter, without 'None' and 'False'). Fault names for
`--ablate` come from the registry (`experiment.faults.FAULTS`, which loads without torch) when the
parser is built. Every flag is checked here, at parse time, before a command imports torch or
transformers: a misspelt name (command, option, choice, fault) is refused with the closest known
one. Knows argparse; runs no model.
"""
from __future__ import annotations

import argparse
import difflib
import re
import textwrap
from pathlib import Path

from eagle_nb.io import paths

CONVENTIONS = ["hf", "vllm", "speculators", "eagle", "sglang", "sglang-config", "specforge"]


class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Keeps the examples' line breaks; shows each option's default unless it is None, off or
    empty, or the help already says it; never breaks a hyphenated name (a fault, a flag) across
    lines."""

    def _get_help_string(self, action):
        text = action.help or ""
        d = action.default
        if "(default" in text or d is None or d is False or d == [] or d == argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def did_you_mean(value: str, known) -> str:
    """'; did you mean 'x'?' for the closest of `known` to `value`, or ''."""
    close = difflib.get_close_matches(str(value), [str(k) for k in known], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


class Parser(argparse.ArgumentParser):
    """argparse's parser, with the closest known name suggested for a misspelt choice (a command,
    a format, an engine) or option (`unrecognized`)."""

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            known = list(action.choices)
            is_command = isinstance(action.choices, dict)      # the subcommands: {name: parser}
            raise argparse.ArgumentError(
                None if is_command else action,
                f"{'unknown command' if is_command else 'invalid choice:'} {value!r}"
                f"{did_you_mean(value, known)} (choose from {', '.join(map(str, known))})")

    def unrecognized(self, extra: list[str]):
        """Exit with a usage error naming the arguments this parser does not know."""
        flags = [x.split("=")[0] for x in extra if x.startswith("-")]
        known = re.findall(r"(?<![\w-])--?\w[\w-]*", self.format_usage())    # every option is in it
        hint = did_you_mean(flags[0], known) if flags else ""
        self.error(f"unrecognized arguments: {' '.join(extra)}{hint}")


def command(sub, name: str, help: str, description: str, examples: str) -> argparse.ArgumentParser:
    """A command's parser: its one-line `help` (the top-level list), `description` and `examples`
    (its own --help) and the kit's formatter. It remembers itself (`a.command_parser`), so that an
    argument it does not know is refused with its own usage."""
    epilog = "examples:\n" + textwrap.indent(textwrap.dedent(examples).strip(), "  ")
    p = sub.add_parser(name, help=help, description=description, epilog=epilog,
                       formatter_class=Formatter)
    p.set_defaults(command_parser=p)
    return p


# -- options several commands take -----------------------------------------------------------------
def verbose(p) -> None:
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also show library progress bars and warnings (model loading, kernel start-up)")


def shown(path) -> str:
    """A shipped path for help texts: relative to the repository when inside it."""
    path = Path(path)
    return str(path.relative_to(paths.REPO_ROOT)) if path.is_relative_to(paths.REPO_ROOT) else str(path)


def target(p) -> None:
    p.add_argument("--target", default=None,
                   help="target model: HF checkpoint directory or a hub id already in the local "
                        f"cache (default: the shipped target, {shown(paths.SHIPPED_TARGET)})")


def drafter(p) -> None:
    p.add_argument("--drafter", default=None,
                   help="EAGLE-3 drafter checkpoint directory, any format (default: the shipped "
                        f"drafter, {shown(paths.SHIPPED_DRAFTER)})")


def prompts(p, required: bool = False):
    """--chat | --prompt | --prompts (the group, for commands that add a fourth way); none given:
    the shipped pair's prompts (prompt_list)."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--chat", help="one user turn, sent through the target's chat template with its "
                                  "generation prompt (what a chat endpoint sends)")
    g.add_argument("--prompt", help="one raw prompt text (what a completions endpoint sends)")
    g.add_argument("--prompts", help="JSON lines file: a 'messages' list (chat) or a 'prompt' text "
                                     "(raw) per line (default: the shipped pair's, "
                                     f"{shown(paths.SHIPPED_PROMPTS)}; a shipped target or drafter "
                                     "brings its own pair's)")
    return g


def prompt_list(a) -> list:
    """The prompts the flags name: [Chat] for --chat, [text] for --prompt, the file's for --prompts,
    else the prompts of the shipped pair that --target / --drafter belong to (the default pair's)."""
    from eagle_nb.io.prompts import Chat, read_prompts
    if getattr(a, "chat", None) is not None:
        return [Chat.user(nonempty(a.chat, "--chat"))]
    if a.prompt is not None:
        return [nonempty(a.prompt)]
    if a.prompts is None:
        files = paths.pair_for(getattr(a, "target", None), getattr(a, "drafter", None)) or paths.SHIPPED
        return read_prompts(paths.shipped(files.prompts, "the shipped prompts"))
    return read_prompts(a.prompts)


def layers(p, default: str | None = "eagle3") -> None:
    p.add_argument("--layers", default=default, type=layer_spec,
                   help="which layers: 'eagle3' (low, mid, high), 'all', or comma-separated ids"
                        + ("" if default else " (default: eagle3)"))
    p.add_argument("--convention", default="hf", choices=CONVENTIONS,
                   help="how --layers ids are written: hf/vllm/speculators/eagle = input of layer k; "
                        "sglang-config/specforge = output of layer k (one less)")
    p.add_argument("--layers-path", default=None,
                   help="dotted path of the decoder layer list, if it cannot be found (e.g. "
                        "model.language_model.layers)")


def depth(p) -> None:
    p.add_argument("--depth", type=int, default=4,
                   help="draft depth k: chain drafts per verify step (SGLang --speculative-num-steps, "
                        "vLLM num_speculative_tokens)")


def max_new_tokens(p, default: int) -> None:
    p.add_argument("--max-new-tokens", type=int, default=default, help="new tokens generated per prompt")


def temperature(p) -> None:
    p.add_argument("--temperature", type=float, default=0.0,
                   help="0 = greedy; > 0 samples with rejection sampling")


def seed(p) -> None:
    p.add_argument("--seed", type=int, default=0, help="random seed (sampling)")


def ablate(p, what: str) -> None:
    """--ablate NAME (repeatable): `what` it does in this command, then every registered fault."""
    from eagle_nb.experiment.faults import FAULTS
    p.add_argument("--ablate", action="append", default=[], metavar="NAME", type=fault_name,
                   help=f"{what} (repeatable); one of: {', '.join(f.name for f in FAULTS)}")


def condition(p, what: str) -> None:
    """--condition NAME (repeatable): `what` it does in this command, then every registered
    serving condition (conditions/registry.py)."""
    from eagle_nb.conditions.registry import names
    p.add_argument("--condition", action="append", default=[], metavar="NAME", type=condition_name,
                   help=f"{what} (repeatable; docs/conditions.md); one of: {', '.join(names())}")


def device(p) -> None:
    p.add_argument("--device", default=None,
                   help="cpu, cuda, cuda:1, ... (default: CUDA when available, else CPU)")


def json_output(p) -> None:
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


# -- checks of option values -----------------------------------------------------------------------
def fault_name(name: str) -> str:
    """A switchable fault's name (argparse `type`: checked while parsing)."""
    from eagle_nb.experiment.faults import FAULTS
    known = [f.name for f in FAULTS]
    from eagle_nb.conditions.registry import names
    if name in names():
        raise argparse.ArgumentTypeError(f"{name!r} is a serving condition, not a fault in the files: "
                                         f"use --condition {name}")
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown fault {name!r}{did_you_mean(name, known)} "
                                         f"(known: {', '.join(known)})")
    return name


def condition_name(name: str) -> str:
    """A serving condition's name (argparse `type`: checked while parsing)."""
    from eagle_nb.conditions.registry import names
    known = list(names())
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown condition {name!r}{did_you_mean(name, known)} "
                                         f"(known: {', '.join(known)})")
    return name


LAYER_WORDS = ("eagle3", "all")


def layer_spec(spec: str) -> str:
    """--layers: 'eagle3', 'all' or comma-separated integers (argparse `type`: the spelling is
    checked while parsing; the ids against the target once it is known, `layer_ids`)."""
    if spec in LAYER_WORDS:
        return spec
    try:
        [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'eagle3', 'all' or comma-separated integers, got "
                                         f"{spec!r}{did_you_mean(spec, LAYER_WORDS)}") from None
    return spec


def layer_ids(spec: str, convention: str, num_layers: int) -> list[int]:
    """HF layer ids from --layers ('eagle3', 'all' or ids written in --convention)."""
    from eagle_nb.model.layers import eagle3_layers, to_hf
    if spec == "eagle3":
        return list(eagle3_layers(num_layers))
    if spec == "all":
        return list(range(num_layers + 1))
    try:
        ids = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--layers: expected 'eagle3', 'all' or comma-separated integers, got {spec!r}")
    return to_hf(ids, convention)


def nonempty(prompt: str, flag: str = "--prompt") -> str:
    """--prompt (or --chat), refused when empty."""
    if not prompt:
        raise ValueError(f"{flag} is empty; give the text to start from, e.g. {flag} 'def f(x):'")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError as e:   # argv bytes that are not UTF-8 arrive as lone surrogates
        raise ValueError(f"{flag} is not UTF-8 text (byte {ord(prompt[e.start]) & 0xFF:#04x} at "
                         f"character {e.start}); check the terminal's encoding, or put the prompt "
                         f"in a --prompts JSON-lines file") from None
    return prompt
