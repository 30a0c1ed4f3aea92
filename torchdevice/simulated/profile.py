"""What a simulated device is, apart from the machinery every simulated device shares: a :class:`Profile`.

The machinery (:mod:`.device`, :mod:`.backend`, :mod:`.kernels`, :mod:`.presentation`) is one ``PrivateUse1``
backend over host memory; a profile says what that backend is to the program: its target's name, the device type
its tensors say they are on, how torch's messages name it, how many devices there are, how its allocator counts
memory and how much each device has, and, for a GPU, which card (:mod:`torchdevice.device.gpus`). What it refuses
is its kernel table's (:class:`~.kernels.SimulatedKernels`). One profile is active while its target is installed
(a process has one ``PrivateUse1`` backend); :func:`active` says which.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from torchdevice.device.gpus import Gpu


@dataclass(frozen=True)
class Profile:
    target: str
    """The target's name (``mps-sim``), also its verdicts' in the capability cache."""
    type: str
    """The device type its tensors say they are on (``mps``, ``cuda``)."""
    backend: str
    """How torch's messages name the device (``MPS``, ``CUDA``)."""
    devices: int = 1
    """How many devices (``cuda:0`` ... ``cuda:N-1``)."""
    block: int = 1
    """Every allocation is counted rounded up to a multiple of it, where memory is not CUDA's caching allocator's."""
    segment: int = 1
    """The allocator reserves memory by segments of this many bytes, likewise."""
    gpu: Gpu | None = None
    """The card simulated (its name, capability, memory), for a GPU: its memory is CUDA's caching allocator's
    (``caching_allocator.h``), holding the card's memory."""

    def shown(self, index: int = 0) -> torch.device:
        """What a tensor of device ``index`` says it is on (``cuda:1``)."""
        return torch.device(self.type, index)

    @property
    def capacity(self) -> int:
        """Bytes each device holds at most (0: unbounded: the host's memory)."""
        return self.gpu.memory if self.gpu is not None else 0


MAC = Profile("mps-sim", "mps", "MPS")
"""Apple silicon: one device, its memory counted byte for byte and bounded by the host's."""


def nvidia(devices: int, gpu: Gpu) -> Profile:
    """``devices`` NVIDIA GPUs of the card ``gpu``, their memory counted as CUDA's caching allocator counts it."""
    return Profile("cuda-sim", "cuda", "CUDA", devices, gpu=gpu)


_active: list[Profile] = [MAC]


def active() -> Profile:
    """The profile of the simulated device installed (the Mac's where none is)."""
    return _active[-1]


def activate(profile: Profile) -> None:
    """Make ``profile`` the active one until :func:`deactivate`."""
    _active.append(profile)


def deactivate(profile: Profile) -> None:
    _active.remove(profile)
