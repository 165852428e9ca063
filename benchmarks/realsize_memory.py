"""Peak memory of inspect / doctor --static-only / load_drafter + one draft step / convert on
real-shaped drafters (published configs, random bf16 weights: eagle_nb/checkpoints/real_shaped.py),
beside the checkpoint's file size and the budget each command is held to.

    python benchmarks/realsize_memory.py [--cases kimi-k2.5,llama-3.1-8b] [--scale 1.0] [--dir /tmp/rs]
                                         [--to speculators] [--keep]

Each command runs in its own process; its peak is the high-water mark of that process's memory
(VmHWM; eagle_nb/io/peak_memory.py, the kit's one meter). Each case is built under --dir (about
7 GB for Kimi-K2.5 at scale 1), reused when already there, and removed afterwards unless --keep.
By default the four drafters docs/large-targets.md discusses, one after another.
Budgets (GiB): inspect 0.6; doctor 1.2 x drafter file + 0.6; load 1.2 x (drafter file +
borrowed embedding) + 0.6; convert the largest tensor written + 1.
"""
from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from eagle_nb.checkpoints.real_shaped import CASES, build
from eagle_nb.io.lazy_weights import open_weights
from eagle_nb.io.peak_memory import peak_rss_mib
from eagle_nb.io.target_parts import TargetParts

GiB = 2 ** 30
STEP = """import sys, torch, eagle_nb
d = eagle_nb.load_drafter(sys.argv[1], target=sys.argv[2])
c = d.config
x = torch.randn(1, 8, c.fc_in_features).to(d.fc.weight.dtype)
logits, _ = d.step(torch.randint(0, c.vocab_size, (1, 8)), d.fuse(x))
assert torch.isfinite(logits).all() and d.fc.weight.dtype == torch.bfloat16"""


def sizes(d: Path, t: Path) -> tuple[float, float, float]:
    """(drafter file GiB, borrowed embedding GiB (0 when the drafter has its own), largest tensor GiB)."""
    w = open_weights(d)
    file = sum(f.stat().st_size for f in d.iterdir()) / GiB
    own = any(k.endswith("embed_tokens.weight") for k in w)
    parts = TargetParts(t)
    emb = 0 if own else parts.nbytes(parts.embed_key())
    largest = max([w.entry(k).nbytes for k in w] + [emb]) / GiB
    emb /= GiB
    return file, emb, largest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="kimi-k2.5,llama-3.1-8b,qwen3-235b,gpt-oss-20b",
                    help=f"comma-separated, of {sorted(CASES)}")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--dir", default="/tmp/eagle_nb_realsize")
    ap.add_argument("--to", default="speculators", help="convert destination format")
    ap.add_argument("--keep", action="store_true", help="keep the built checkpoints under --dir")
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown cases {unknown}; known: {sorted(CASES)}")
    for case in cases:
        measure(case, a.scale, Path(a.dir), a.to, a.keep)
        print()


def measure(case: str, scale: float, folder: Path, to: str, keep: bool) -> None:
    """Build `case` at `scale` under `folder` (unless there) and print each command's peak."""
    root = folder / f"{case}-{scale:g}"
    d, t = root / "drafter", root / "target"
    if not (d / "config.json").exists():
        t0 = time.time()
        build(case, root, scale)
        print(f"built {root} in {time.time() - t0:.0f} s")
    file, emb, largest = sizes(d, t)
    base = peak_rss_mib(["-c", "import torch, eagle_nb.checkpoints.convert"]) / 1024
    out = root / "converted"
    shutil.rmtree(out, ignore_errors=True)
    runs = [("inspect --target", ["-m", "eagle_nb", "inspect", str(d), "--target", str(t)], 0.6),
            ("doctor --static-only", ["-m", "eagle_nb", "doctor", "--drafter", str(d), "--target", str(t),
                                      "--static-only"], 1.2 * file + 0.6),
            ("load_drafter + 1 step", ["-c", STEP, str(d), str(t)], 1.2 * (file + emb) + 0.6),
            (f"convert --to {to}", ["-m", "eagle_nb", "convert", str(d), str(out), "--to", to,
                                    "--target", str(t)], largest + 1.0)]
    print(f"{case} x{scale:g}: drafter file {file:.2f} GiB, borrowed embedding {emb:.2f} GiB, "
          f"largest tensor {largest:.2f} GiB; python + torch + eagle_nb: {base:.2f} GiB")
    print(f"{'command':<24} {'peak RSS GiB':>12} {'budget GiB':>10} {'seconds':>8}")
    for name, args, budget in runs:
        t0 = time.time()
        try:
            rss = peak_rss_mib(args) / 1024
        except RuntimeError as e:     # e.g. a conversion the destination cannot express
            print(f"{name:<24} {'refused':>12} {budget:>10.2f} {time.time() - t0:>8.0f}  {str(e)[-160:]!r}")
            continue
        ok = "ok" if rss <= budget else "OVER"
        print(f"{name:<24} {rss:>12.2f} {budget:>10.2f} {time.time() - t0:>8.0f}  {ok}")
    shutil.rmtree(out if keep else root, ignore_errors=True)


if __name__ == "__main__":
    main()
