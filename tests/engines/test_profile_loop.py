"""The profile loop closed through a real engine: the kit measures the real pair's speculation
profile (the one pass), `profile --to vllm`'s knob (synthetic rejection sampling with the
profile's marginal rates) starts vLLM's CPU engine, and the acceptance vLLM then counts equals the
profile's, position by position and in tau, within the engine's own sampling interval.

vLLM's synthetic sampler draws each step's accepted count from the rates whatever the drafter
proposes, so what is tested is the convention (marginal, not conditional; per position; tau =
1 + their sum), which a wrong convention fails by far more than the interval. Opt-in (`-m slow`):
one more vLLM start-up (~1 min) than the default suite can afford. Skipped on vLLM's CPU build,
which refuses synthetic acceptance (engines/vllm.py SYNTHETIC_CPU_NOTE): it needs a GPU build.
"""
from __future__ import annotations

import math

import pytest

from eagle_nb.engines import engine_unavailable_reason, vllm
from eagle_nb.engines.engine_run import run_on_engine
from eagle_nb.experiment.profile_run import measure_profile
from eagle_nb.io.paths import REAL
from helpers import code_prompts

REASON = engine_unavailable_reason() or (None if REAL.target.is_dir() and REAL.drafter_speculators.is_dir()
                                         else "the real pair is not set up (make install)")
if REASON is None and vllm.cpu_build():
    REASON = vllm.SYNTHETIC_CPU_NOTE          # measured: the engine core dies on the first request
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(REASON is not None, reason=f"cannot run: {REASON}")]
K = 4
Z = 3.5            # |observed - rate| within 3.5 standard errors of the engine's own sampling


def _chat(n: int) -> list[str]:
    from eagle_nb.io.prompts import read_prompts
    return read_prompts(REAL.prompts)[:n]


def test_vllm_synthetic_acceptance_from_the_kits_profile_reproduces_it():
    from eagle_nb.experiment.pair import Pair
    pair = Pair(REAL.target, REAL.drafter)
    prof = measure_profile(pair, _chat(8), K, max_new_tokens=64)
    cfg = vllm.knobs(prof, K, str(REAL.drafter_speculators))["speculative_config"]
    rates = cfg["synthetic_acceptance_rates"]
    ids = [pair.encode(p)[0].tolist() for p in _chat(16) + code_prompts(16)]
    run = run_on_engine("vllm", ids, max_new_tokens=96, temperature=0.0, seed=0, target=REAL.target,
                        drafter=REAL.drafter_speculators, depth=K,
                        server_kw={"speculative_config": cfg})
    c = run.counters
    n = c.num_drafts
    per_pos = [a / n for a in c.accepted_per_pos]
    tau = 1 + c.num_accepted_tokens / n
    # the accepted count per step is m with P(m >= i) = rates[i-1]: its variance gives tau's error
    surv = [1.0, *rates, 0.0]
    pm = [surv[m] - surv[m + 1] for m in range(K + 1)]
    mean = sum(m * p for m, p in enumerate(pm))
    se_tau = math.sqrt(max(sum(m * m * p for m, p in enumerate(pm)) - mean ** 2, 1e-12) / n)
    print(f"profile rates {rates} (tau {1 + sum(rates):.3f}); vLLM over {n:.0f} steps: per-position "
          f"{[round(x, 3) for x in per_pos]}, tau {tau:.3f} +- {se_tau:.3f}")
    assert n > 300
    for r, got in zip(rates, per_pos):
        assert abs(got - r) <= Z * math.sqrt(max(r * (1 - r), 1e-6) / n), (rates, per_pos)
    assert abs(tau - (1 + sum(rates))) <= Z * se_tau, (tau, rates)
    # power: read as conditional rates, the same numbers would give another per-position curve
    conditional = [math.prod(rates[:i + 1]) for i in range(K)]
    assert any(abs(got - w) > Z * math.sqrt(max(w * (1 - w), 1e-6) / n)
               for got, w in zip(per_pos, conditional)), (per_pos, conditional)
