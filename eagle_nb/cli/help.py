"""What `eagle-nb --help` says: the kit's description, each command's purpose and examples, and
the help of every option, attached to an argparse parser by `document(parser)` (defaults shown).

Fault names in the help come from the registry (`faults.FAULTS`), so a new fault is listed without
touching this file. Knows argparse and the command names; runs nothing.
"""
from __future__ import annotations

import argparse

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

COMMANDS = {
    "capture": ("capture the target's hidden states at layer ids (what EAGLE-3 would capture)",
                'eagle-nb capture --prompt "def f(x):" --layers eagle3 --json\n'
                'eagle-nb capture --prompt "x" --layers 1,3,4 --convention sglang-config'),
    "inspect": ("detect a drafter checkpoint's format and validate it (keys, shapes, ids, d2t)",
                "eagle-nb inspect data/drafter_speculators\n"
                "eagle-nb inspect /models/EAGLE3-drafter --target /models/Llama-3.1-8B-Instruct --json\n"
                "eagle-nb inspect /tmp/drafter.gguf --target data/target   # llama.cpp GGUF"),
    "convert": ("convert a drafter checkpoint between formats (key maps, layer-id translation)",
                "eagle-nb convert data/drafter_speculators /tmp/d --to sglang\n"
                "eagle-nb convert /models/sglang-drafter /tmp/e --to eagle --target /models/target\n"
                "eagle-nb convert data/drafter_eagle /tmp/drafter.gguf --to gguf --target data/target\n"
                "eagle-nb convert data/target /tmp/target.gguf --to gguf"),
    "speculate": ("speculative decoding with every acceptance metric, healthy or with named faults",
                  "eagle-nb speculate --prompts data/eval_prompts.jsonl --depth 4\n"
                  "eagle-nb speculate --prompt 'def f(x):' --ablate fc-bypass --temperature 1"),
    "report": ("execute the notebooks and write self-contained HTML reports and index.html",
               "eagle-nb report --out reports\n"
               "eagle-nb report --out r --notebook 03 --param n_prompts=16 --param max_new_tokens=64"),
}


def _faults() -> str:
    from eagle_nb.experiment.faults import FAULTS
    return ", ".join(f.name for f in FAULTS)


OPTIONS = {
    "target": "target model: HF checkpoint directory or a hub id already in the local cache "
              "(default: the shipped target in data/target)",
    "drafter": "EAGLE-3 drafter checkpoint directory, any format (default: data/drafter_eagle)",
    "prompt": "one prompt text",
    "prompts": "JSON lines file with a 'prompt' field per line",
    "layers": "which layers: 'eagle3' (low, mid, high), 'all', or comma-separated ids",
    "convention": "how --layers ids are written: hf/vllm/speculators/eagle = input of layer k; "
                  "sglang-config/specforge = output of layer k (one less)",
    "layers_path": "dotted path of the decoder layer list, if it cannot be found (e.g. "
                   "model.language_model.layers)",
    "device": "cpu, cuda, cuda:1, ... (default: CUDA when available, else CPU)",
    "json": "print JSON instead of a table",
    "path": "drafter checkpoint directory, or a llama.cpp GGUF file",
    "src": "source drafter checkpoint directory (any format)",
    "dst": "destination directory (a file with --to gguf)",
    "to": "format to write; gguf: a llama.cpp GGUF file (SRC may then also be a stock Llama target)",
    "depth": "draft depth k (chain drafts per verify step)",
    "max_new_tokens": "new tokens generated per prompt",
    "temperature": "0 = greedy; > 0 samples with rejection sampling",
    "seed": "random seed (sampling)",
    "ablate": lambda: f"switch on a named fault (repeatable); one of: {_faults()}",
    "out": "output directory for the HTML reports, executed notebooks and results.json",
    "param": "notebook parameter override (repeatable), e.g. n_prompts=16 or target_path=/models/x",
    "notebook": "only these notebooks (repeatable): a path, a stem or a prefix such as 03",
    "force": "replace a non-empty destination",
    "fault": "with --to gguf: write a deliberately broken drafter, to show llama.cpp a named fault",
    "drop_embed": "write without the source's embed_tokens",
    "truncate_prompt": "cut prompts longer than the model's context instead of refusing them",
    "verbose": "also show library progress bars and warnings (model loading, kernel start-up)",
}


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the examples' line breaks and shows each option's default (unless it is None, off or
    empty, or the help already says it)."""

    def _get_help_string(self, action):
        text = action.help or ""
        d = action.default
        off = d is None or d is False or d == [] or d == argparse.SUPPRESS
        if "(default" in text or off or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"

    def _split_lines(self, text, width):
        """Wrap option help without breaking inside hyphenated names (fault names, flags)."""
        import textwrap
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _help(action) -> str | None:
    text = OPTIONS.get(action.dest)
    return text() if callable(text) else text


def _fill(parser) -> None:
    parser.formatter_class = _Formatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                desc, examples = COMMANDS.get(name, ("", ""))
                sub.description = sub.description or desc
                sub.epilog = "examples:\n" + "\n".join(f"  {x}" for x in examples.splitlines()) \
                    if examples else None
                _fill(sub)
            for choice in action._choices_actions:
                choice.help = choice.help or COMMANDS.get(choice.dest, ("",))[0]
        elif action.dest in OPTIONS:          # the table is the one place options are described
            action.help = _help(action)


def document(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Attach the description, examples and option help to `parser` and its subcommands."""
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    _fill(parser)
    return parser
