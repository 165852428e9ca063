"""Which precision a recipe phase computes in, chosen by what this machine measures: a matmul of
the drafter's shapes timed in bfloat16 and float32 side by side. bfloat16 pays only where the CPU
has matrix units for it (AMX: `torch.cpu._is_amx_tile_supported()`; NOTE:
`torch.backends.cpu.get_cpu_capability()` says "AVX512" and never names AMX, so it is the wrong
probe); elsewhere bf16 runs slower than fp32 and the recipe keeps fp32, saying so in one line.

Master weights, optimizer state and the loss stay float32 in every case (autocast casts the
matmuls only). Knows torch, nothing about models.
"""
from __future__ import annotations

import contextlib
import time

import torch


def amx() -> bool:
    try:
        return bool(torch.cpu._is_amx_tile_supported())
    except AttributeError:                                   # an older torch
        return False


def _gflops(dtype, m=1024, k=576, n=1536, reps=6) -> float:
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    a @ b                                                    # warm-up (oneDNN picks its kernel)
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * m * k * n * reps / (time.perf_counter() - t0) / 1e9


def measure() -> dict:
    """{"amx", "bf16_gflops", "fp32_gflops"} of a 1024x576 by 576x1536 matmul on this machine."""
    return {"amx": amx(), "bf16_gflops": round(_gflops(torch.bfloat16), 1),
            "fp32_gflops": round(_gflops(torch.float32), 1)}


def choose(asked: str = "auto", probe: dict | None = None, min_gain: float = 1.5) -> tuple[str, str]:
    """(dtype name, one line saying why): `asked` "float32"/"bfloat16" is kept; "auto" takes
    bfloat16 when it measures at least `min_gain` times float32's matmul throughput."""
    if asked not in ("auto", "float32", "bfloat16"):
        raise ValueError(f"precision {asked!r}: choose auto, float32 or bfloat16")
    if asked != "auto":
        return asked, f"precision: {asked} (asked)"
    p = probe or measure()
    gain = p["bf16_gflops"] / max(p["fp32_gflops"], 1e-9)
    why = (f"bf16 {p['bf16_gflops']:.0f} vs fp32 {p['fp32_gflops']:.0f} GFLOP/s "
           f"({gain:.1f}x; AMX {'yes' if p['amx'] else 'no'})")
    if gain >= min_gain:
        return "bfloat16", f"precision: bfloat16 autocast, fp32 master weights and loss: {why}"
    return "float32", f"precision: float32, bf16 does not pay on this CPU: {why}"


def autocast(dtype: str):
    """The context a phase computes in: bf16 autocast on the CPU, or nothing for float32."""
    if dtype == "bfloat16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()
