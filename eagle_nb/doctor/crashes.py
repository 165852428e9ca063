"""Faults that only crash: the exact error text each engine prints, reproduced for a given pair, and
recognised in an engine log.

Texts come from the engines' own messages as reported (docs/faults.md).
Where the message is produced by torch itself (a width mismatch inside `fc`, a vocabulary-size
mismatch), `reproduce` runs the same torch operation on tensors of the pair's shapes and returns the
message torch raises, so the text is torch's, not ours. Knows nothing about models beyond shapes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CrashFault:
    name: str
    engine: str
    story: str
    reference: str
    fix: str
    pattern: str                    # regex matched against each log line


CRASHES = {c.name: c for c in (
    CrashFault("fc-width-mismatch", "vLLM / SGLang",
               "the target hands over a different number of aux states than the drafter's fc was "
               "trained on (ids shifted past the last layer, the final boundary not captured, "
               "N-1 states), so fc's matmul fails",
               "docs/faults.md: sglang PR #32334 (#32226), 8640 vs 5760 width; docs/faults.md: vllm PR #46973",
               "capture exactly the drafter's aux ids (final boundary pre-norm); fc input = n_aux x Ht",
               r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)"),
    CrashFault("no-eagle3-interface", "vLLM",
               "the target class does not implement SupportsEagle3 (no aux-state capture)",
               "docs/faults.md: vllm #25134, #25927 -> PR #26485; PR #36658; PR #31257",
               "upgrade vLLM to a version whose model class supports EAGLE3 for this architecture",
               r"Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested"),
    CrashFault("no-capture-hooks", "SGLang",
               "the target model class has no `set_eagle3_layers_to_capture` / capture flag",
               "docs/faults.md: sglang PR #9216 (#8434), PR #12319, PR #19689, PR #23569",
               "upgrade SGLang to a version whose model class captures aux states for this architecture",
               r"object has no attribute 'capture_aux_hidden_states'"),
    CrashFault("draft-num-layers", "SGLang",
               "the draft config says num_hidden_layers != 1 (often copied from the target)",
               "docs/faults.md: SpecForge #129",
               "set num_hidden_layers to 1 in the draft config (the drafter has one decoder layer)",
               r"EAGLE3 currently only supports 1 layer"),
    CrashFault("draft-vocab-short", "SpecForge",
               "fewer distinct training tokens than draft_vocab_size, so d2t/t2d are shorter than "
               "the configured draft vocabulary",
               "docs/faults.md: SpecForge PR #76",
               "pad the draft vocabulary with zero-frequency ids (or lower draft_vocab_size)",
               r"The size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)"),
)}


def _torch_message(fn) -> str:
    try:
        fn()
    except RuntimeError as e:
        return str(e).splitlines()[0]
    raise AssertionError("expected torch to raise")  # pragma: no cover - shapes chosen to fail


def reproduce(name: str, *, tokens: int = 7, fc_in: int = 576, hidden: int = 192,
              n_states: int | None = None, target_hidden: int | None = None,
              target_class: str = "LlamaForCausalLM", draft_vocab: int = 32000,
              distinct_tokens: int = 6054) -> str:
    """The error text the engine prints for this fault with the given shapes. For
    'fc-width-mismatch', `n_states` captured states of width `target_hidden` meet an fc expecting
    `fc_in` inputs."""
    import torch
    import torch.nn.functional as F
    if name == "fc-width-mismatch":
        width = (n_states if n_states is not None else 2) * (target_hidden or hidden)
        return _torch_message(lambda: F.linear(torch.zeros(tokens, width), torch.zeros(hidden, fc_in)))
    if name == "draft-vocab-short":
        return _torch_message(lambda: torch.zeros(draft_vocab) + torch.zeros(distinct_tokens))
    if name == "no-capture-hooks":
        return f"AttributeError: '{target_class}' object has no attribute 'capture_aux_hidden_states'"
    if name == "no-eagle3-interface":
        return "Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested"
    if name == "draft-num-layers":
        return "EAGLE3 currently only supports 1 layer"
    raise ValueError(f"unknown crash fault {name!r}; known: {sorted(CRASHES)}")


def recognise(text: str) -> list[tuple[str, str]]:
    """(crash fault name, the log line) for every line that carries a known engine error."""
    found = []
    for line in text.splitlines():
        for c in CRASHES.values():
            if re.search(c.pattern, line):
                found.append((c.name, line.strip()))
                break
    return found
