"""Shared timing helpers: best-of-N wall time per call, measured side by side."""

from __future__ import annotations

import timeit
from collections.abc import Callable


def per_call(fn: Callable[[], object], *, number: int = 10_000, repeat: int = 7) -> float:
    """Best per-call time in seconds over ``repeat`` runs of ``number`` calls."""
    fn()  # warm up
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def compare(name: str, candidate: Callable[[], object], baseline: Callable[[], object], **kw) -> dict:
    """Time ``candidate`` against ``baseline`` interleaved in one process; return a result row."""
    # Interleave to share the machine's state (frequency, caches) between both sides.
    best_c = best_b = float("inf")
    for _ in range(kw.pop("rounds", 3)):
        best_b = min(best_b, per_call(baseline, **kw))
        best_c = min(best_c, per_call(candidate, **kw))
    return {"name": name, "candidate_s": best_c, "baseline_s": best_b, "ratio": best_c / best_b}
