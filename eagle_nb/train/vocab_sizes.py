"""How large a draft vocabulary the committed answers call for, measured before a run trains one
(the goal: 97.5% of the target's tokens on the evaluation chats, 95% in every language).

For each candidate size the vocabulary is built as the recipe builds it, from the most frequent
ids of the committed training answers (`drafter.build_vocab_map`; every `heldout_every`-th request
held out and never counted), then its coverage is measured (conditions/coverage.py) on the
held-out answers and on the target's greedy answers to the evaluation chats, each grouped by
language and category, with the ceiling tau at depth k of a drafter right on every token it can
draft. The shipped drafter's own vocabulary is measured beside them.

`python -m eagle_nb.train vocab-sizes [--sizes 8192,12288,16384]`. Knows the committed files and
the coverage measure; nothing about training.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from eagle_nb.conditions.coverage import Coverage, coverage
from eagle_nb.io.paths import DATA_DIR, REAL
from eagle_nb.train.drafter import build_vocab_map
from eagle_nb.train.drafter_scale import COMMITTED, read_committed

LABELS = ("language", "category")


@dataclass
class VocabSizesConfig:
    target: str = str(REAL.target)
    drafter: str = str(REAL.drafter)           # "" skips the shipped drafter's row
    prompts: str = str(REAL.prompts)
    committed: str = str(COMMITTED)
    sizes: str = "8192,12288,16384"
    answered: int = 0                          # count only the first n committed answers (0: all)
    heldout_every: int = 25
    max_new_tokens: int = 128
    depth: int = 4


def split_answers(reqs: list[dict], answers: dict, heldout_every: int, answered: int = 0):
    """(training tokens (N,) int64, held-out continuations, their labels) of the committed
    requests that have an answer, the first `answered` of them (0: all)."""
    rows = [r for r in reqs if r["id"] in answers][:answered or None]
    train = [t for r in rows if r["id"] % heldout_every for t in answers[r["id"]]["answer_ids"]]
    held = [r for r in rows if r["id"] % heldout_every == 0]
    if not train or not held:
        raise ValueError(f"{len(rows)} answered requests give {len(train)} training tokens and "
                         f"{len(held)} held-out answers (ids divisible by {heldout_every}): need both")
    return (torch.tensor(train, dtype=torch.long), [answers[r["id"]]["answer_ids"] for r in held],
            [{k: r[k] for k in LABELS if k in r} for r in held])


def size_rows(train: torch.Tensor, workloads: dict, sizes, vocab_size: int, depth: int = 4,
              extra: dict | None = None) -> list[dict]:
    """One row per vocabulary: {"vocabulary", "size", "training_share", workload: Coverage}.
    `workloads`: name -> (continuations, labels); `extra`: name -> (V,) bool mask measured beside."""
    counts = torch.bincount(train, minlength=vocab_size)
    masks = {}
    for n in sizes:
        _, inside, _ = build_vocab_map(train, vocab_size, n)
        masks[f"top {n} of the answers"] = inside
    masks.update(extra or {})
    rows = []
    for name, inside in masks.items():
        row = {"vocabulary": name, "size": int(inside.sum()),
               "training_share": float(counts[inside].sum() / counts.sum())}
        for w, (conts, labels) in workloads.items():
            row[w] = coverage(conts, inside, depth, labels)
        rows.append(row)
    return rows


def report_lines(rows: list[dict]) -> list[str]:
    lines = []
    for row in rows:
        lines.append(f"{row['vocabulary']} ({row['size']} ids): {100 * row['training_share']:.2f}% "
                     "of the training answers' tokens")
        for w, cov in row.items():
            if not isinstance(cov, Coverage):
                continue
            langs = ", ".join(f"{v} {100 * (1 - g['outside_share']):.1f}%"
                              for v, g in sorted(cov.groups.get("language", {}).items()))
            lines.append(f"  {w}: {100 * cov.inside_share:.2f}% of {cov.tokens} tokens; ceiling tau "
                         f"at k = {cov.depth} {cov.tau_ceiling:.3f}; by language: {langs}")
    return lines


def measure_sizes(c: VocabSizesConfig) -> dict:
    from pathlib import Path

    from eagle_nb.conditions.workload import drafter_mask, split_rows, workload_continuations
    from eagle_nb.io.prompts import read_prompt_rows
    from eagle_nb.model.targets import load_target
    reqs, answers = read_committed(Path(c.committed), texts=False)
    train, held, held_labels = split_answers(reqs, answers, c.heldout_every, c.answered)
    target, tok = load_target(c.target, device="cpu", dtype=torch.float32)
    prompts, labels = split_rows(read_prompt_rows(c.prompts))
    evals = workload_continuations(target, tok, prompts, c.max_new_tokens)
    extra = {}
    if c.drafter:
        from eagle_nb.checkpoints.load import load_drafter
        extra[f"shipped drafter ({Path(c.drafter).name})"] = drafter_mask(load_drafter(c.drafter, target))
    rows = size_rows(train, {"held-out answers": (held, held_labels), "evaluation chats": (evals, labels)},
                     [int(s) for s in c.sizes.split(",")], target.config.vocab_size, c.depth, extra)
    print("\n".join(report_lines(rows)))
    return {"training_tokens": int(train.numel()), "answered_requests": len(answers),
            "rows": [{k: (summary(v) if isinstance(v, Coverage) else v) for k, v in r.items()} for r in rows]}


def summary(cov: Coverage) -> dict:
    """The numbers a size is chosen by: inside share pooled, per language and category, ceiling."""
    return {"tokens": cov.tokens, "inside_share": round(cov.inside_share, 4),
            "tau_ceiling": cov.tau_ceiling and round(cov.tau_ceiling, 3),
            **{f"by_{f}": {v: round(1 - g["outside_share"], 4) for v, g in sorted(vals.items())}
               for f, vals in cov.groups.items()}}
