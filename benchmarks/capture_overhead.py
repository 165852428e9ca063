"""What does hook capture cost? Forward time and retained memory, capture vs output_hidden_states.

    python benchmarks/capture_overhead.py [--target DIR] [--batch 4] [--seq 256] [--reps 15]

Three modes of one target forward, run in one process with *interleaved* repetitions (the order
rotates every repetition, and ratios are taken within a repetition, then the median across them),
because a shared machine drifts more than the effect being measured:
  plain   model(ids)                                   no hooks at all
  capture with capture(model, eagle3_layers(L)): model(ids)   (hook registration + removal included)
  ohs     model(ids, output_hidden_states=True)        HF's way: keeps all L+1 states

Memory: on CUDA the extra peak allocation of each mode over the plain forward
(torch.cuda.max_memory_allocated); everywhere, the bytes of the tensors each mode *retains*
(captured states vs the hidden_states tuple). Target: `--target`, else data/target if it holds a
checkpoint, else a tiny random 8-layer Llama built here; the script says which.

NOTE: transformers 5 installs its own output-capturing hooks on the decoder layers the first time a
model runs with output_hidden_states=True, and leaves them there. The ohs mode therefore runs on a
deep copy, so that `plain` really is a hook-free forward.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from anywhere, no install
from eagle_nb.model.capture import capture
from eagle_nb.model.decoder import num_decoder_layers
from eagle_nb.model.layers import eagle3_layers
from eagle_nb.model.targets import load_target, pick_device
from eagle_nb.io.paths import SHIPPED_TARGET

MODES = ("plain", "capture", "ohs")


def build_target(path: str | None, device: torch.device, dtype: torch.dtype):
    """(model, description). A random 8-layer Llama shaped like the shipped target if no checkpoint."""
    path = Path(path) if path else SHIPPED_TARGET
    if (path / "config.json").exists():
        model, _ = load_target(path, device=str(device), dtype=dtype)
        return model, f"checkpoint {path}"
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=4096, hidden_size=192, intermediate_size=512, num_hidden_layers=8,
                      num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    model = LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    return model, f"tiny random LlamaForCausalLM (no checkpoint at {path})"


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_mode(mode: str, model, model_ohs, ids, layer_ids):
    """One forward in `mode`; returns the tensors that mode keeps besides the logits."""
    if mode == "plain":
        model(input_ids=ids)
        return []
    if mode == "capture":
        with capture(model, layer_ids) as states:
            model(input_ids=ids)
        return [states[k] for k in layer_ids]
    return list(model_ohs(input_ids=ids, output_hidden_states=True).hidden_states)


def time_modes(model, model_ohs, ids, layer_ids, reps: int, warmup: int, device) -> dict:
    """Per-mode lists of seconds; the mode order rotates every repetition."""
    times = {m: [] for m in MODES}
    for r in range(warmup + reps):
        order = MODES[r % 3:] + MODES[:r % 3]
        for mode in order:
            sync(device)
            t0 = time.perf_counter()
            run_mode(mode, model, model_ohs, ids, layer_ids)
            sync(device)
            if r >= warmup:
                times[mode].append(time.perf_counter() - t0)
    return times


def peak_extra_bytes(mode, model, model_ohs, ids, layer_ids, device) -> int | None:
    """CUDA only: peak allocation of one forward in `mode` (outputs kept alive) above the start."""
    if device.type != "cuda":
        return None
    torch.cuda.empty_cache()
    sync(device)
    start = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    kept = run_mode(mode, model, model_ohs, ids, layer_ids)
    sync(device)
    peak = torch.cuda.max_memory_allocated(device) - start
    del kept
    return peak


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default=None, help="HF checkpoint dir (default: data/target if present)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default=None, help="float32 (CPU default) / bfloat16 (CUDA default)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = ap.parse_args(argv)

    # 1. target, inputs, layers
    device = pick_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype) if args.dtype else (
        torch.bfloat16 if device.type == "cuda" else torch.float32)
    model, what = build_target(args.target, device, dtype)
    model_ohs = copy.deepcopy(model)
    L = num_decoder_layers(model)
    layer_ids = list(eagle3_layers(L))
    vocab = model.get_input_embeddings().num_embeddings
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab - 1, (args.batch, args.seq), generator=g).to(device)
    print(f"target: {what}; {type(model).__name__}, {L} layers, {dtype}, {device}, "
          f"threads={torch.get_num_threads()}; batch {args.batch} x {args.seq} tokens; "
          f"capture ids {layer_ids}; {args.reps} interleaved reps after {args.warmup} warm-up")

    # 2. timing, interleaved; ratios within each repetition
    with torch.no_grad():
        times = time_modes(model, model_ohs, ids, layer_ids, args.reps, args.warmup, device)
        kept = {m: run_mode(m, model, model_ohs, ids, layer_ids) for m in ("capture", "ohs")}
        peaks = {m: peak_extra_bytes(m, model, model_ohs, ids, layer_ids, device) for m in MODES}
    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    assert hooks == 0, "capture left hooks on the model (or the plain model had some)"

    # 3. report
    def ratio(mode):
        rs = sorted(a / b for a, b in zip(times[mode], times["plain"]))
        q = statistics.quantiles(rs, n=4)
        return statistics.median(rs), q[0], q[2]

    plain_ms = 1e3 * statistics.median(times["plain"])
    print(f"\nplain forward: median {plain_ms:.1f} ms "
          f"(min {1e3 * min(times['plain']):.1f}, max {1e3 * max(times['plain']):.1f})")
    print(f"{'quantity':44s} {'median':>8s} {'p25':>8s} {'p75':>8s}")
    for mode, label in (("capture", "time capture / plain"), ("ohs", "time output_hidden_states / plain")):
        med, lo, hi = ratio(mode)
        print(f"{label:44s} {med:8.3f} {lo:8.3f} {hi:8.3f}")
    cap_b, ohs_b = tensor_bytes(kept["capture"]), tensor_bytes(kept["ohs"])
    print(f"{'retained bytes capture / output_hidden_states':44s} {cap_b / ohs_b:8.3f}"
          f"   ({cap_b / 2**20:.2f} MiB vs {ohs_b / 2**20:.2f} MiB)")
    if device.type == "cuda":
        extra = {m: peaks[m] - peaks["plain"] for m in ("capture", "ohs")}
        print(f"{'peak extra bytes capture / ohs (CUDA)':44s} {extra['capture'] / max(extra['ohs'], 1):8.3f}"
              f"   (peak: plain {peaks['plain'] / 2**20:.1f}, capture {peaks['capture'] / 2**20:.1f}, "
              f"ohs {peaks['ohs'] / 2**20:.1f} MiB)")
    med = ratio("capture")[0]
    print(f"\ncapture overhead {100 * (med - 1):+.1f}% (goal <= +3%): {'OK' if med <= 1.03 else 'ABOVE GOAL'}")


if __name__ == "__main__":
    main()
