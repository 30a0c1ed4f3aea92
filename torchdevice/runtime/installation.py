"""An installation: everything ``install()`` sets up that the patched entry points consult.

One :class:`Installation` is made per ``install()`` and handed to every patch that needs it (the generated
wrappers, the hand-written entry points, the ``torch.cuda`` emulation): the target, the maps that translate
CUDA device values, this thread's current emulated device, the ledger of device memory, the emulated CUDA
generators, and the counts of redirects (:class:`~torchdevice.reporting.counts.RedirectCounts`). Nothing of it
lives in module globals, so ``uninstall()`` leaves nothing behind.

No emulated target (MPS, CPU) has pinned host memory as CUDA knows it: ``pin_memory=True`` and
``.pin_memory()`` are honoured by ordinary memory.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from torchdevice.device.residence import Ledger, device_index, mark_of
from torchdevice.device.target import Target
from torchdevice.reporting.counts import RedirectCounts
from torchdevice.runtime.device_maps import DeviceMap, StrictDeviceMap, TypeMap


class _Selected(threading.local):
    """This thread's current emulated device (``torch.cuda.set_device``); a class default, as a thread-local
    attribute missing in a thread costs a caught ``AttributeError`` on every read."""

    index = 0


class Installation:
    """What ``"cuda"`` means now (``target``, for each of the ``emulated`` CUDA devices) and the state the
    runtime's patches share."""

    def __init__(self, target: Target, emulated: int = 1, prefer_mlx: bool = False) -> None:
        self.target = target
        self.device = device = target.device
        """The device ``"cuda"`` is translated to."""
        self.emulated = emulated
        self.prefer_mlx = prefer_mlx
        self.devices = DeviceMap(device, emulated, target.aliases, target.indexed)
        self.strict = StrictDeviceMap(device, emulated, target.aliases, target.indexed)
        self.types = TypeMap(device, emulated, target.aliases)
        # a simulated GPU's tensors say cuda: the route names the target, so no report takes it for a real one
        shown = target.name if target.gpu is not None else (target.shown or device).type
        self.counts = RedirectCounts(f"cuda->{shown}")
        self.ledger = Ledger(emulated)
        self.selected = _Selected()
        self.hosting = target.hosting
        """How dtypes the target has no tensors of are kept (float64 on MPS); None where it has them all."""
        self._indices: dict[Any, int | None] = {}
        self.generators = _generators(target, emulated)

    def device_value(self, slot: int, value: Any) -> Any:
        """``value`` translated by the device map, counted in ``slot`` when it was redirected."""
        try:
            translated = self.devices[value]
        except TypeError:  # unhashable: not a device; torch reports the bad argument itself
            return value
        if translated != value:
            self.counts.count(slot)
        return translated

    def device_type(self, slot: int, value: Any) -> Any:
        """``value`` translated by the device-type map, counted in ``slot`` when it was redirected."""
        try:
            translated = self.types[value]
        except TypeError:
            return value
        if translated != value:
            self.counts.count(slot)
        return translated

    def device_of(self, index: int) -> torch.device:
        """The device emulated CUDA device ``index`` is: the target's device of that index where it has one per
        CUDA device (the simulated GPUs), else the target."""
        return torch.device(self.device.type, index) if self.target.indexed else self.device

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

    def loaded(self, result: Any, value: Any) -> Any:
        """``result``, a module loaded for the CUDA device ``value`` (``torch.jit.load``): its parameters and buffers
        marked as on that device."""
        if isinstance(result, torch.nn.Module):
            index = self.index(value)
            for t in result.state_dict().values():
                self.ledger.mark(t, index)
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
        refused the dtype (float64 on MPS, see :meth:`torchdevice.device.hosted.Hosting.remade`), else
        ``error`` raised."""
        if self.hosting is None:
            raise error
        return self.hosting.remade(error, call, args, kwargs, device)

    def generator(self, value: Any) -> torch.Generator | None:
        """The emulated CUDA generator of the device ``value`` names; None where the target's own default
        generator is already separate from the host's (MPS)."""
        return self.generators[self.index(value)] if self.generators else None


def _generators(target: Target, emulated: int) -> tuple[torch.Generator, ...]:
    """One generator per emulated device on the CPU target (a Mac's device, real or simulated, and the simulated GPUs
    have their own default generators, which stand for CUDA's): CUDA's generators are not the host's, so seeding or
    drawing on "cuda" leaves the host's stream alone. Each starts from the host's initial seed, as
    ``torch.manual_seed`` seeds CUDA's too."""
    if target.mps or target.own is not None:
        return ()
    seed = torch.initial_seed()
    return tuple(torch.Generator().manual_seed(seed) for _ in range(emulated))
