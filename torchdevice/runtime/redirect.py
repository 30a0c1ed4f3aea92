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
from torchdevice.runtime.hosted import Hosting
from torchdevice.runtime.report import log, redirects
from torchdevice.runtime.residence import Ledger, device_index, mark_of


class _Selected(threading.local):
    """This thread's current emulated device (``torch.cuda.set_device``); a class default, as a thread-local
    attribute missing in a thread costs a caught ``AttributeError`` on every read."""

    index = 0


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
        self.ledger = Ledger(emulated)
        self.selected = _Selected()
        self._indices: dict[Any, int | None] = {}
        self.generators = _generators(target, emulated)
        self.hits: list[int] = []
        self.ops: list[str] = []
        self._slots: dict[str, int] = {}
        self._logged: set[int] = set()
        self._lock = threading.Lock()
        self.hosting: Hosting | None = None
        """How dtypes the target has no tensors of are kept (set by :mod:`.tensors` on MPS)."""

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
        if translated != value:
            self.count(slot)
        return translated

    def device_type(self, slot: int, value: Any) -> Any:
        """``value`` translated by the device-type map, counted when it was redirected."""
        try:
            translated = self.types[value]
        except TypeError:
            return value
        if translated != value:
            self.count(slot)
        return translated

    def current(self) -> int:
        """This thread's current emulated device."""
        return self.selected.index

    def index(self, value: Any) -> int:
        """The emulated device a CUDA device value names: its index, else the current device."""
        try:
            index = self._indices[value]
        except KeyError:
            device = torch.device(value) if isinstance(value, str) else value
            index = device.index if isinstance(device, torch.device) else device
            self._indices[value] = index = index if isinstance(index, int) else None
        except TypeError:  # unhashable: not a device value
            index = None
        return self.current() if index is None else index

    def born(self, result: Any, value: Any) -> Any:
        """``result`` of a call asked for the CUDA device ``value``: its storage marked as on that device
        (not inside a graph being compiled: its tensors are not the ones that will run)."""
        if isinstance(result, torch.Tensor) and not torch.compiler.is_compiling():
            self.ledger.mark(result, self.index(value))
        return result

    def inherit(self, result: Any, args: tuple[Any, ...]) -> Any:
        """``result`` of a call asked for no device, made like its first argument: marked as on that
        argument's emulated device, if it has one."""
        if args and isinstance(args[0], torch.Tensor) and not torch.compiler.is_compiling():
            index = device_index(args[0])
            if index is not None and isinstance(result, torch.Tensor):
                self.ledger.mark(result, index)
        return result

    def copied(self, result: Any, value: Any) -> Any:
        """``result`` of a call asked for the CUDA device ``value`` that may share its argument's memory: as
        it is when that memory is already on the device, else a copy there (a GPU copies host memory)."""
        if isinstance(result, torch.Tensor) and not torch.compiler.is_compiling():
            index = self.index(value)
            if mark_of(result) != index:
                result = self.ledger.mark(result.clone(), index)
        return result

    def remade(self, error: BaseException, call: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               device: Any) -> Any:
        """A call to the target that raised ``error``: made again with its result hosted where the target
        refused the dtype (float64 on MPS, see :meth:`.hosted.Hosting.remade`), else ``error`` raised."""
        if self.hosting is None:
            raise error
        return self.hosting.remade(error, call, args, kwargs, device)

    def generator(self, value: Any) -> torch.Generator | None:
        """The emulated CUDA generator of the device ``value`` names; None where the target's own default
        generator is already separate from the host's (MPS)."""
        return self.generators[self.index(value)] if self.generators else None

    def flush(self) -> None:
        """Move pending counts into ``torchdevice.runtime.report.redirects``."""
        with self._lock:
            for slot, n in enumerate(self.hits):
                if n:
                    self.hits[slot] = 0
                    redirects[(self.ops[slot], self.route)] += n


def _generators(target: torch.device, emulated: int) -> tuple[torch.Generator, ...]:
    """One generator per emulated device where device tensors are host tensors (the CPU and simulated Mac
    targets; a real Mac's device has its own default generator): CUDA's
    generators are not the host's, so seeding or drawing on "cuda" leaves the host's stream alone. Each
    starts from the host's initial seed, as ``torch.manual_seed`` seeds CUDA's too."""
    if target.type == "mps" and torch.backends.mps.is_available():
        return ()
    seed = torch.initial_seed()
    return tuple(torch.Generator().manual_seed(seed) for _ in range(emulated))
