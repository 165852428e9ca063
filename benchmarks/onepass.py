"""One-pass greedy acceptance vs the live loop on the shipped pair, side by side in one run
(issue 20's goals), with wall-clock and CPU seconds (CPU time is the steadier figure on a shared
machine), plus the size and peak memory of the target pass that keeps every layer.

    python benchmarks/onepass.py [--threads 1] [--live-switches N] [--skip-live]

Scenarios:
  1. notebook 04's new fault: 8 depths x 8 prompts x 32 tokens, with the healthy run already
     done (target pass cached), and cold (target pass included); goal <= 1 s;
  2. every switchable fault x depths 1..8 x 16 prompts x 64 tokens; goal <= 15 s. The live loop
     is measured on the first N switches (default 3) and scaled to all, unless N >= all;
  3. the doctor's measurement phase (`doctor.measure.measure_faults`, every fault, k = 4): by one pass at
     its default workload (16 x 64), by the live loop at its old default (8 x 32); goal <= 10 s;
  4. the target pass for 16 prompts x (64 + 8) tokens with every layer kept: bytes and peak RSS;
  5. the same from a recording (`eagle-nb record --layers all --final-hidden`, the target not
     loaded: experiment/recorded_pair.py): recording size on disk, scenario 2 on the recording
     beside scenario 2 on the loaded pair, and the peak RSS of opening the recording.
Every one-pass figure is checked against the live loop where both ran (accept counts equal).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from eagle_nb.doctor import measure as doctor_measure
from eagle_nb.doctor import state as doctor_state
from eagle_nb.experiment import faults as F
from eagle_nb.experiment.pair import Pair, shipped_prompts
from eagle_nb.experiment.setting import grid
from eagle_nb.io.peak_memory import PeakRSS
from eagle_nb.loop import target_states as TS


class Clock:
    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.w, time.process_time() - self.c

    def __str__(self):
        return f"{self.wall:7.2f}s wall {self.cpu:7.2f}s cpu"


def sweep(pair, prompts, switches, tokens, one_pass: bool):
    pair.use_one_pass = one_pass
    out = {}
    for f in switches:
        try:
            out[f] = pair.sweep(prompts, grid([f], range(1, 9), max_new_tokens=tokens), progress=False)
        except ValueError:          # not applicable on this pair: same both ways (tests/loop/test_onepass.py)
            pass
    pair.use_one_pass = True
    return out


def same(a, b) -> bool:
    return all([s.accept_counts for s in x.stats] == [s.accept_counts for s in b[f][x.setting].stats]
               for f in a if f in b for x in a[f])


def row(name, one, live, goal, note=""):
    ratio = f"{live.cpu / one.cpu:6.1f}x" if live else "   -  "
    live_s = str(live) if live else "not run"
    print(f"| {name} | {one} | {live_s} | {ratio} | {goal} | {note} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--live-switches", type=int, default=3)
    ap.add_argument("--skip-live", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"shipped pair, {a.threads} thread(s), {time.strftime('%Y-%m-%d %H:%M')}; load average "
          f"{Path('/proc/loadavg').read_text().split()[0] if Path('/proc/loadavg').exists() else '?'}")
    print("| scenario | one pass | live loop | live/one (cpu) | goal | note |\n|---|---|---|---|---|---|")
    switches = [()] + [(f.name,) for f in F.FAULTS]

    # 1. notebook 04: a new fault over 8 depths, healthy already computed
    p8 = shipped_prompts(8)
    pair = Pair()
    with Clock() as cold:
        sweep(pair, p8, [()], 32, True)
    with Clock() as one:
        o = sweep(pair, p8, [("layer-ids+1",)], 32, True)
    live = None
    if not a.skip_live:
        with Clock() as live:
            lv = sweep(pair, p8, [("layer-ids+1",)], 32, False)
    row("04 new fault, 8 depths, 8 x 32", one, live, "<= 1 s",
        f"cold (target pass included) {cold}" + ("" if live is None else f"; equal: {same(o, lv)}"))

    # 2. every switch x depths 1..8 x 16 x 64, on a fresh pair (target passes included)
    p16 = shipped_prompts(16)
    pair = Pair()
    with Clock() as one:
        o = sweep(pair, p16, switches, 64, True)
    loaded_sweep = (one, o)
    live, note = None, f"{len(o)} applicable switches"
    if not a.skip_live:
        part = [f for f in switches if f in o][:a.live_switches]
        with Clock() as live:
            lv = sweep(pair, p16, part, 64, False)
        scale = len(o) / len(part)
        live.wall, live.cpu = live.wall * scale, live.cpu * scale
        note += (f"; live measured on {len(part)} ({', '.join(F.label(f) for f in part)}) and scaled "
                 f"x{scale:.1f}" if scale > 1 else "") + f"; equal: {same(o, lv)}"
    row("all switches x 8 depths x 16 x 64", one, live, "<= 15 s", note)

    # 3. the doctor's measurement phase (fresh pairs: nothing cached)
    pair = Pair()
    n, new = doctor_state.workload(0.0, None, None)
    prompts = shipped_prompts(n)
    with Clock() as one:
        doctor_measure.measure_faults(pair, prompts, 4, new, progress=False)
    live = None
    if not a.skip_live:
        pair = Pair()
        pair.use_one_pass = False
        ln, lnew = doctor_state.WORKLOAD["live loop"]
        with Clock() as live:
            doctor_measure.measure_faults(pair, shipped_prompts(ln), 4, lnew, progress=False)
    row("doctor measurement phase (k=4)", one, live, "<= 10 s",
        f"one pass at {len(prompts)} x {new}, live loop at its old default 8 x 32")

    # 4. the target pass with every layer kept
    pair = Pair()
    ids = [pair.encode(p) for p in p16]
    with PeakRSS() as peak, Clock() as c:
        st = TS.from_target(pair.target, ids, 64 + 8)
    fed = sum(x.numel() - 1 for x in st.ids)
    keys = len(st.states)
    print(f"\ntarget pass, 16 prompts x (64 + 8) tokens, {keys - 1} layer ids + final kept: "
          f"{st.nbytes() / 2**20:.1f} MiB ({st.nbytes() / fed / 1024:.1f} KiB per fed token = "
          f"{keys} states x {pair.target.config.hidden_size} x 4 bytes); peak RSS above the loaded "
          f"pair {peak.mib:.1f} MiB; {c}")

    # 5. the same workload from a recording, the target not loaded
    import tempfile

    from eagle_nb.experiment.recorded_pair import RecordedPair
    from eagle_nb.recordings.recording import record
    with tempfile.TemporaryDirectory() as tmp:
        with Clock() as rc:
            rec = record(pair.target, ids, Path(tmp) / "rec", "all", max_new_tokens=64, lookahead=8,
                         final_hidden=True, eos_token_id=pair.tokenizer.eos_token_id, texts=p16,
                         progress=False)
        size = sum(f.stat().st_size for f in rec.iterdir())
        with PeakRSS() as peak:
            rp = RecordedPair(rec)
        with Clock() as one:
            r = sweep(rp, p16, switches, 64, True)
    print(f"\nrecording, 16 prompts x (64 + 8) tokens, every layer + final: {size / 2**20:.1f} MiB on "
          f"disk ({size / fed / 1024:.1f} KiB per fed token), written in {rc.wall:.1f}s (one token "
          f"per forward); opening it: peak RSS +{peak.mib:.1f} MiB")
    lone, lo = loaded_sweep
    print("| scenario | recorded pair | loaded pair (one pass) | note |\n|---|---|---|---|")
    print(f"| all switches x 8 depths x 16 x 64 | {one} | {lone} | {len(r)} switches a recording "
          f"answers of {len(lo)}; equal where both ran: {same(r, lo)} |")


if __name__ == "__main__":
    main()
