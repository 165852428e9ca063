"""`python -m eagle_nb.train target|drafter [--flags]`: rebuild the shipped models from scratch.

Thin: parses flags into the training config dataclasses and calls the package.
"""
from __future__ import annotations

import argparse
import dataclasses
import json


def _add_dataclass_flags(p: argparse.ArgumentParser, cls) -> None:
    for f in dataclasses.fields(cls):
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)


def main(argv=None) -> None:
    from eagle_nb.train.target import TargetTrainConfig, train_target
    ap = argparse.ArgumentParser(prog="python -m eagle_nb.train")
    sub = ap.add_subparsers(dest="what", required=True)
    _add_dataclass_flags(sub.add_parser("target", help="train the shipped target LM"), TargetTrainConfig)
    try:
        from eagle_nb.train.drafter import DrafterTrainConfig, train_drafter
        _add_dataclass_flags(sub.add_parser("drafter", help="train the EAGLE-3 drafter (TTT)"),
                             DrafterTrainConfig)
    except ImportError:
        DrafterTrainConfig = None
    args = vars(ap.parse_args(argv))
    what = args.pop("what")
    if what == "target":
        metrics = train_target(TargetTrainConfig(**args))
    else:
        metrics = train_drafter(DrafterTrainConfig(**args))
    print(json.dumps({k: v for k, v in metrics.items() if k != "continuations"}, indent=2, default=str))


if __name__ == "__main__":
    main()
