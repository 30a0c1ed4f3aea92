"""One active translation: the target, its lookup maps and cheap per-op redirect counters.

No emulated target (MPS, CPU) has pinned host memory as CUDA knows it: ``pin_memory=True`` and
``.pin_memory()`` are honoured by ordinary memory.

Wrappers on hot paths bump a slot of a plain list (``hits[slot] += 1``); the first redirect of an op
goes through :meth:`Redirect.first`, which logs it once. :meth:`Redirect.flush` folds the pending
counts into :mod:`torchdevice.runtime.report`, so ``report()["redirects"]`` has exact per-op counts without
a ``Counter`` update on every call.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from torchdevice.runtime.devices import DeviceMap, StrictDeviceMap, TypeMap
from torchdevice.runtime.report import log, redirects


class Redirect:
    """What ``"cuda"`` means now (the target, for each of the ``emulated`` CUDA devices) and how often each
    op was redirected."""

    def __init__(self, target: torch.device, emulated: int = 1) -> None:
        self.target = target
        self.emulated = emulated
        self.devices = DeviceMap(target, emulated)
        self.strict = StrictDeviceMap(target, emulated)
        self.types = TypeMap(target, emulated)
        self.route = f"cuda->{target.type}"
        self.hits: list[int] = []
        self.ops: list[str] = []
        self._slots: dict[str, int] = {}
        self._logged: set[int] = set()
        self._lock = threading.Lock()

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

    def device(self, slot: int, value: Any) -> Any:
        """``value`` translated by the device map, counted when it was redirected."""
        try:
            translated = self.devices[value]
        except TypeError:  # unhashable: not a device; torch reports the bad argument itself
            return value
        if translated is not value:
            self.count(slot)
        return translated

    def device_type(self, slot: int, value: Any) -> Any:
        """``value`` translated by the device-type map, counted when it was redirected."""
        try:
            translated = self.types[value]
        except TypeError:
            return value
        if translated is not value:
            self.count(slot)
        return translated

    def flush(self) -> None:
        """Move pending counts into ``torchdevice.runtime.report.redirects``."""
        with self._lock:
            for slot, n in enumerate(self.hits):
                if n:
                    self.hits[slot] = 0
                    redirects[(self.ops[slot], self.route)] += n
