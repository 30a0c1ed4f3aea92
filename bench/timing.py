"""Shared timing helpers: best-of-N wall time per call, measured side by side."""

from __future__ import annotations

import timeit
from collections.abc import Callable


def per_call(fn: Callable[[], object], *, number: int = 10_000, repeat: int = 7,
             timer: Callable[[], float] = timeit.default_timer) -> float:
    """Best per-call time in seconds over ``repeat`` runs of ``number`` calls (``timer``: wall time by default;
    ``time.process_time`` counts only this process's CPU time, which the load of other processes disturbs less)."""
    fn()  # warm up
    return min(timeit.repeat(fn, number=number, repeat=repeat, timer=timer)) / number


def compare(name: str, candidate: Callable[[], object], baseline: Callable[[], object], **kw) -> dict:
    """Time ``candidate`` against ``baseline`` interleaved in one process; return a result row."""
    # Interleave to share the machine's state (frequency, caches) between both sides.
    best_c = best_b = float("inf")
    for _ in range(kw.pop("rounds", 3)):
        best_b = min(best_b, per_call(baseline, **kw))
        best_c = min(best_c, per_call(candidate, **kw))
    return {"name": name, "candidate_s": best_c, "baseline_s": best_b, "ratio": best_c / best_b}
