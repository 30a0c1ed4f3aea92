"""What the runtime did in this process: redirections, fallbacks, stand-ins and Triton kernels, counted per op and
route.

The hot paths only bump counters; logging happens once per distinct (op, route), at INFO on the
``torchdevice`` logger (shown with ``TORCHDEVICE_LOG=info``, see :func:`torchdevice.logs.configure_logging`). The report
of a whole program (``torchdevice run --report``) is made of these counters, one set per process
(:mod:`torchdevice.reporting.program`).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Callable

log = logging.getLogger("torchdevice")

redirects: Counter[tuple[str, str]] = Counter()
fallbacks: Counter[tuple[str, str]] = Counter()
fallback_seconds: defaultdict[tuple[str, str], float] = defaultdict(float)
"""(op, route) -> seconds spent running the op elsewhere (copies included)."""
fallback_why: dict[str, str] = {}
"""op -> why the first of its calls fell back (``no MPS kernel``, ``float64 not supported on MPS``...)."""
standins: Counter[tuple[str, str]] = Counter()
"""(stand-in function, device type or ``"import"``) -> how many times the program used it (:func:`record_standin`)."""
triton_launches: Counter[str] = Counter()
triton_seconds: defaultdict[str, float] = defaultdict(float)
"""Triton kernel (``module.qualname``) -> launches run in Triton's interpreter, and the seconds they took
(:func:`record_triton`)."""


class RedirectCounts:
    """Per-op redirect counters of one installation, cheap on hot paths.

    Wrappers bump a slot of a plain list (``hits[slot] += 1``); the first redirect of an op goes through
    :meth:`first`, which logs it once. :meth:`flush` folds the pending counts into :data:`redirects`, so
    ``report()["redirects"]`` has exact per-op counts without a ``Counter`` update on every call.
    """

    def __init__(self, route: str) -> None:
        self.route = route
        """``cuda->cpu``, ``cuda->mps``."""
        self.hits: list[int] = []
        self.ops: list[str] = []
        self._slots: dict[str, int] = {}
        self._logged: set[int] = set()
        self._lock = threading.Lock()
        _open.append(self)

    def close(self) -> None:
        """Flush, and stop counting for an installation that ends."""
        self.flush()
        if self in _open:
            _open.remove(self)

    def slot(self, op: str) -> int:
        """The counter index of ``op`` (one per op, shared by every wrapper that reports as ``op``)."""
        with self._lock:
            if op not in self._slots:
                self._slots[op] = len(self.ops)
                self.ops.append(op)
                self.hits.append(0)
            return self._slots[op]

    def first(self, slot: int) -> None:
        """Count the first redirect of ``slot`` since the last flush; log the op's first redirect ever
        (from eager code: a log call inside a compiled graph would break it)."""
        import torch

        self.hits[slot] += 1
        if slot not in self._logged and not torch.compiler.is_compiling():
            self._logged.add(slot)
            log.info("redirect %s: %s", self.ops[slot], self.route)

    def count(self, slot: int) -> None:
        """Count one redirect (for hand-written paths: one call instead of inlined code)."""
        if self.hits[slot]:
            self.hits[slot] += 1
        else:
            self.first(slot)

    def flush(self) -> None:
        """Move pending counts into :data:`redirects`."""
        with self._lock:
            for slot, n in enumerate(self.hits):
                if n:
                    self.hits[slot] = 0
                    redirects[(self.ops[slot], self.route)] += n


_open: list[RedirectCounts] = []
"""The counters of the installation in place (none, or one)."""


def flush() -> None:
    """Fold the pending redirect counts of the installation in place into :data:`redirects`."""
    for counts in list(_open):
        counts.flush()


def target() -> str:
    """The device type ``"cuda"`` is redirected to now (``"cuda"`` itself when nothing is installed)."""
    return _open[-1].route.partition("->")[2] if _open else "cuda"


def record_fallback(op: str, route: str, seconds: float = 0.0, why: str | Callable[[], str] = "") -> None:
    """Count one call of ``op`` that ran elsewhere than the target (``route``: ``"mlx"`` or ``"cpu"``), which
    took ``seconds`` there, for the reason ``why`` (a callable: asked only at the op's first fallback)."""
    key = (op, route)
    if key not in fallbacks:
        why = why() if callable(why) else why
        log.info("fallback %s: %s (%s)", op, route, why or "reason unknown")
        fallback_why.setdefault(op, why)
    fallbacks[key] += 1
    fallback_seconds[key] += seconds


def record_redirect(op: str, route: str) -> None:
    """Count one redirection made outside the generated wrappers (an SDPA backend choice mapped to the target)."""
    key = (op, route)
    if key not in redirects:
        log.info("redirect %s: %s", op, route)
    redirects[key] += 1


def record_standin(name: str, route: str) -> None:
    """Count one call of stand-in ``name`` (``flash_attn.flash_attn_func``) with tensors on ``route`` (a device
    type), or its import (``route`` ``"import"``)."""
    key = (name, route)
    if key not in standins:
        log.info("stand-in %s: %s", name, route)
    standins[key] += 1


def record_triton(kernel: str, seconds: float) -> None:
    """Count one launch of Triton kernel ``kernel`` that Triton's interpreter ran in ``seconds``."""
    if kernel not in triton_launches:
        log.info("triton kernel %s: runs in Triton's interpreter", kernel)
    triton_launches[kernel] += 1
    triton_seconds[kernel] += seconds


def triton() -> dict[str, dict[str, int | float]]:
    """``{kernel: {"launches": n, "seconds": s}}``: the report's ``triton`` section."""
    return {kernel: {"launches": n, "seconds": triton_seconds[kernel]} for kernel, n in sorted(triton_launches.items())}


def report() -> dict[str, dict[str, dict[str, int]]]:
    """``{"redirects": {op: {route: n}}, "fallbacks": {op: {route: n}}, "standins": {name: {route: n}}}``."""
    return {"redirects": _nest(redirects), "fallbacks": _nest(fallbacks), "standins": _nest(standins)}


def fallback_rows() -> list[dict[str, object]]:
    """One row per (aten overload, route): ``op``, ``route``, ``count``, ``seconds``, ``why``."""
    return [{"op": op, "route": route, "count": n, "seconds": fallback_seconds[op, route],
             "why": fallback_why.get(op, "")} for (op, route), n in sorted(fallbacks.items())]


def reset() -> None:
    redirects.clear()
    fallbacks.clear()
    fallback_seconds.clear()
    fallback_why.clear()
    standins.clear()
    triton_launches.clear()
    triton_seconds.clear()


def _nest(counter: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (op, route), n in sorted(counter.items()):
        out.setdefault(op, {})[route] = n
    return out
