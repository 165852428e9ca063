"""How long does a live panel take to answer a click? Seconds from a control change to the figure
showing the new setting, on the shipped pair, with the panels in their kernel (background) mode.

    python benchmarks/panel_latency.py [--prompts 8] [--tokens 32] [--threads 1]

Scenarios (the notebook defaults: 8 prompts x 32 new tokens):
  03 AblationPanel  first draw (nothing cached); tick fc-bypass; three quick changes (tick
                    d2t-absolute, depth 6, T=1): time to the last one's figure, and how many runs
                    were computed (the two settings clicked past are skipped);
  04 DepthPanel     with healthy and fc-bypass at T=0/1 for k=1..8 cached (as after notebook 04's
                    sweep): a new fault (first draw at the shown depth, then all 8 depths); the
                    shown depth changed (cached); three quick changes (fault, T, fault).
Prints one line per scenario. Wall-clock on a shared machine: run it when the machine is quiet.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def until(pred, timeout=600.0) -> float:
    t0 = time.perf_counter()
    while not pred():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("panel did not answer")
        time.sleep(0.01)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    import torch

    from eagle_nb.views import widgets
    from eagle_nb.experiment.pair import Pair, shipped_prompts
    from eagle_nb.experiment.setting import grid
    torch.set_num_threads(a.threads)
    pair = Pair()
    prompts = shipped_prompts(a.prompts)
    runs = lambda: len(pair._cache)   # noqa: E731 - settings computed so far

    def change(panel, *steps):
        """Apply (control, value) steps back to back; seconds to the last setting's first figure,
        to idle, and the runs computed meanwhile."""
        n0, t0 = runs(), time.perf_counter()
        for k, v in steps:
            panel.controls[k].value = v
        want = panel.setting()
        until(lambda: panel.last_setting == want)
        first = time.perf_counter() - t0
        panel.wait()
        return first, time.perf_counter() - t0, runs() - n0

    print(f"{a.prompts} prompts x {a.tokens} new tokens, {torch.get_num_threads()} thread(s)")
    t0 = time.perf_counter()
    p3 = widgets.AblationPanel(pair, prompts, max_new_tokens=a.tokens, background=True)
    until(lambda: p3.last_setting is not None)
    print(f"03 first draw (healthy k=4, nothing cached): {time.perf_counter() - t0:.1f} s")
    first, full, n = change(p3, ("fc-bypass", True))
    print(f"03 tick fc-bypass: figure after {first:.1f} s ({n} run computed)")
    first, full, n = change(p3, ("d2t-absolute", True), ("depth", 6), ("temperature", 1.0))
    print(f"03 three quick changes: the last one's figure after {first:.1f} s, {n} runs computed")

    t0 = time.perf_counter()
    pair.sweep(prompts, grid([(), ("fc-bypass",)], range(1, 9), [0.0, 1.0], max_new_tokens=a.tokens),
               progress=False)
    print(f"(04's sweep, 32 settings, cached in {time.perf_counter() - t0:.1f} s)")
    p4 = widgets.DepthPanel(pair, prompts, max_new_tokens=a.tokens, background=True)
    p4.wait()
    first, full, n = change(p4, ("fault", "d2t-absolute"))
    print(f"04 new fault: shown depth after {first:.1f} s, all 8 depths after {full:.1f} s ({n} runs)")
    first, full, n = change(p4, ("depth", 7))
    print(f"04 shown depth changed (cached): {first:.2f} s")
    first, full, n = change(p4, ("fault", "wrapper-capture"), ("temperature", 1.0), ("fault", "layers0-keys-dropped"))
    print(f"04 three quick changes: the last one at its shown depth after {first:.1f} s, all depths "
          f"after {full:.1f} s; {n} runs computed")


if __name__ == "__main__":
    main()
