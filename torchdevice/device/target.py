"""Targets: the device ``"cuda"`` means, and what is known about it.

A :class:`Target` says which device ``"cuda"`` becomes (``device``: ``cpu``, ``mps``; the simulated Mac's
``simulated:0``) and what the program is shown of it (``shown``: the simulated Mac's tensors say ``mps:0``), where
the fallback engine registers kernels for it (``dispatch_key``) and how torch's error messages name it
(``backend``), what the kernel table knows (the aten overloads it has no kernel for, those to try first and
watch), how it keeps the dtypes it has no tensors of (``hosting``), and whether torch was built for it
(``native``: its generators and events are torch's own). MPS's table is generated from the catalog
(``generated/fallback_table.py``); the CPU has every kernel. The runtime chooses a target's name
(:func:`torchdevice.runtime.activation.resolve`); :func:`for_name` builds the CPU's and MPS's targets; the simulated
devices build their own (:mod:`torchdevice.simulated`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import torch

from torchdevice.device import cuda_memory
from torchdevice.device.aten import Kernel
from torchdevice.device.gpus import Gpu
from torchdevice.device.hosted import Hosting

TARGETS = ("cpu", "mps", "mps-sim", "cuda-sim", "cuda")
"""The names a target is asked for by (``install(target=...)``, ``TORCHDEVICE_TARGET``, ``--target``)."""
SIMULATED_MPS = "mps-sim"
"""Apple silicon simulated on a machine without MPS (:mod:`torchdevice.simulated`)."""
SIMULATED_CUDA = "cuda-sim"
"""NVIDIA GPUs simulated on a machine without CUDA (:mod:`torchdevice.simulated`)."""
SIMULATED = (SIMULATED_MPS, SIMULATED_CUDA)


class OwnDevices(Protocol):
    """A target's own devices, one per CUDA device (the simulated GPUs'): their memory, generators, current device."""

    generators: tuple[torch.Generator, ...]

    def memory(self, index: int) -> tuple[int, int, int, int, int, int]:
        """Device ``index``'s live, peak, reserved and peak reserved bytes, allocations and frees."""

    def reset_peaks(self, index: int) -> None: ...

    def empty_cache(self, index: int) -> None: ...

    def allocator_stats(self, index: int) -> list[int]:
        """A GPU's: CUDA's caching allocator's statistics in one row (``simulated/caching_allocator.h``)."""

    def allocator_snapshot(self, index: int) -> cuda_memory.Part:
        """A GPU's: its segments and their blocks, its trace and where each was made, likewise."""

    def reset_accumulated(self, index: int) -> None: ...

    def set_memory_fraction(self, index: int, fraction: float) -> None: ...

    def select(self, index: int) -> None:
        """Make device ``index`` this thread's current one."""


@dataclass(frozen=True)
class Target:
    name: str
    """Its name among :data:`TARGETS`, also the name of its verdicts in the capability cache."""
    device: torch.device
    """What ``"cuda"`` becomes: the device its tensors are on in C++."""
    dispatch_key: str
    """Where fallback kernels are registered (``"MPS"``)."""
    backend: str
    """How PyTorch's error messages name the device (``"MPS"``)."""
    missing: frozenset[str] = frozenset()
    """Aten overloads (``"aten::cumsum.out"``) without a kernel here: routed without trying."""
    try_first: frozenset[str] = frozenset()
    """Aten overloads tried here first, routed elsewhere on a device-compatibility error."""
    hosting: Hosting | None = None
    """How tensors of the dtypes this device has none of are kept (float64 on MPS); None: it has every dtype."""
    shown: torch.device | None = None
    """What its tensors say they are on, where that is not :attr:`device` (the simulated Mac's ``mps:0``)."""
    aliases: tuple[str, ...] = ()
    """Device types that mean this target too (``"mps"`` on the simulated Mac, where libraries name it)."""
    native: bool = False
    """Whether torch was built for this device: its generators and events are torch's own (a Mac's MPS)."""
    gpu: Gpu | None = None
    """The card a simulated GPU is (:mod:`torchdevice.device.gpus`); None for other targets."""
    own: OwnDevices | None = None
    """Its own devices, where ``cuda:i`` is its device ``i`` (the simulated GPUs'); None: every CUDA index means
    :attr:`device`."""
    kernels: Mapping[tuple[str, str], Kernel] = field(default_factory=dict)
    """The device's own Python kernels, by overload and dispatch key (:func:`~torchdevice.device.aten.kernel_below`:
    the simulated Mac's); none for a device torch was built for."""

    @property
    def indexed(self) -> bool:
        """Whether ``cuda:i`` is its device ``i`` (:attr:`own`)."""
        return self.own is not None

    @property
    def native_is_cpu(self) -> bool:
        """The target's own kernels are the CPU's (the CPU route calls them directly)."""
        return self.dispatch_key == "CPU"

    @property
    def autocast_key(self) -> str:
        """The autocast dispatch key of its tensors (``AutocastCPU``, ``AutocastMPS``, ``AutocastPrivateUse1``)."""
        return f"Autocast{self.dispatch_key}"

    @property
    def mps(self) -> bool:
        """Whether it is Apple silicon (real, or simulated): ``torch.mps`` answers for it."""
        return self.backend == "MPS"


def for_name(name: str) -> Target:
    """The target called ``name`` (``"cpu"`` or ``"mps"``, as the runtime's ``resolve`` names it)."""
    if name == "mps":
        from torchdevice_generated import fallback_table

        device = torch.device("mps")
        return Target("mps", device, "MPS", "MPS", fallback_table.MISSING_ON_MPS, fallback_table.TRY_ON_MPS,
                      Hosting(device, device), native=True)
    if name == "cpu":
        return Target("cpu", torch.device("cpu"), "CPU", "CPU")
    raise ValueError(f"torchdevice: no target {name!r} to build here")
