"""What the runtime did: redirections and fallbacks, counted per op and route.

The hot paths only bump counters; logging happens once per distinct (op, route), at INFO on the
``torchdevice`` logger (enable with ``TORCHDEVICE_LOG=info``).
"""

from __future__ import annotations

import logging
from collections import Counter

log = logging.getLogger("torchdevice")

redirects: Counter[tuple[str, str]] = Counter()
fallbacks: Counter[tuple[str, str]] = Counter()


def record_redirect(op: str, route: str) -> None:
    """Count one call of ``op`` whose device was translated (``route``: e.g. ``"cuda->cpu"``)."""
    key = (op, route)
    if key not in redirects:
        log.info("redirect %s: %s", op, route)
    redirects[key] += 1


def record_fallback(op: str, route: str) -> None:
    """Count one call of ``op`` that ran elsewhere than the target (``route``: ``"mlx"`` or ``"cpu"``)."""
    key = (op, route)
    if key not in fallbacks:
        log.info("fallback %s: %s", op, route)
    fallbacks[key] += 1


def report() -> dict[str, dict[str, dict[str, int]]]:
    """``{"redirects": {op: {route: count}}, "fallbacks": {op: {route: count}}}``."""
    return {"redirects": _nest(redirects), "fallbacks": _nest(fallbacks)}


def reset() -> None:
    redirects.clear()
    fallbacks.clear()


def _nest(counter: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (op, route), n in sorted(counter.items()):
        out.setdefault(op, {})[route] = n
    return out
