"""Which accept-rate formula an SGLang decode log used, and so how many draft tokens it verified,
from the two numbers the log line prints: `accept len: %.2f, accept rate: %.2f`.

SGLang printed the rate as `accept_len / num_draft_tokens` (PR #13212 to #23530) and, after PR
#23530, as accepted drafts / proposed drafts = `(accept_len - 1) / (num_draft_tokens - 1)` for a
chain. Both numbers are rounded to two decimals; `infer_sglang_formula` tries every plausible
`num_draft_tokens` and keeps the one formula that explains every line. The engine-log reader
(engines/logs.py) and the doctor's observation reader (engines/observation.py) both use it.
Knows log numbers only.
"""
from __future__ import annotations

from eagle_nb.loop.metrics import SGLANG_RATE_FORMULAS as FORMULAS


def infer_sglang_formula(lengths, rates, num_draft_tokens: int | None = None) -> dict:
    """Which accept-rate formula fits every (accept len, accept rate) pair, allowing for the
    two-decimal rounding of both numbers. Tries num_draft_tokens 2..17 unless given.
    Returns {"formula", "num_draft_tokens", "explains": fraction of lines fitted}."""
    cands = [num_draft_tokens] if num_draft_tokens else range(2, 18)
    tol = 0.0051
    best = {"formula": "unknown", "num_draft_tokens": None, "explains": 0.0}
    fits_any = []
    for n in cands:
        for name, fn, slack in (("by_draft_tokens", lambda a: a / n, tol / n),
                                ("by_drafts", lambda a: (a - 1) / (n - 1), tol / (n - 1))):
            ok = [abs(r - fn(a)) <= tol + slack for a, r in zip(lengths, rates)]
            frac = sum(ok) / len(ok) if ok else 0.0
            if frac > best["explains"] + 1e-9:
                best = {"formula": name, "num_draft_tokens": n, "explains": frac}
            if frac == 1.0:
                fits_any.append((name, n))
    if len({f for f, _ in fits_any}) > 1:
        best["formula"] = "ambiguous"                      # e.g. every draft accepted (len == N)
        best["candidates"] = [{"formula": f, "num_draft_tokens": n} for f, n in fits_any]
    if any(r > 1.0 for r in rates):
        best = {"formula": "pre-#11572 (rate can exceed 1; formula unverified)",
                "num_draft_tokens": None, "explains": 0.0}
    best["meaning"] = FORMULAS.get(best["formula"], "")
    return best
