"""What a simulated device is, apart from the machinery every simulated device shares: a :class:`Profile`.

The machinery (:mod:`.device`, :mod:`.backend`, :mod:`.kernels`, :mod:`.presentation`, and the features
:data:`torchdevice.simulated.FEATURES`) is one ``PrivateUse1`` backend over host memory; a profile is all it is told:
what the program sees of the device, what the device refuses and in whose words, how its memory is counted, what
the fallback engine completes, and which features it has. :func:`mac` and :func:`nvidia` build Apple silicon's and
an NVIDIA GPU's from the generated tables, the only place that knows what either is; :data:`PROFILES` finds them by
target name. One profile is active while its target is installed (a process has one ``PrivateUse1`` backend);
:func:`active` says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from torchdevice.device import determinism, gpus, limits
from torchdevice.device.gpus import Gpu
from torchdevice.device.target import SIMULATED_CUDA, SIMULATED_MPS

NO_FLOAT64 = "".join(next(limit.row.message for limit in limits.generic() if limit.name == "float64_tensor"))
"""What MPS raises for a float64 tensor (the limits table's generic row)."""
CHOSEN = "simulated-mps"
"""The target name of :func:`chosen` devices, their verdicts' in the capability cache (apart from ``mps-sim``'s)."""


@dataclass(frozen=True)
class Profile:
    target: str
    """The target's name (``mps-sim``), also its verdicts' in the capability cache."""
    type: str
    """The device type its tensors say they are on (``mps``, ``cuda``)."""
    backend: str
    """How torch's messages name the device (``MPS``, ``CUDA``: ``Could not run ... from the 'CUDA' backend``)."""
    devices: int = 1
    """How many devices (``cuda:0`` ... ``cuda:N-1``)."""
    gpu: Gpu | None = None
    """The card simulated (its name, capability, memory), for a GPU: its memory is CUDA's caching allocator's
    (``caching_allocator.h``), holding the card's memory."""
    block: int = 1
    """Every allocation is counted rounded up to a multiple of it, where memory is not CUDA's caching allocator's."""
    segment: int = 1
    """The allocator reserves memory by segments of this many bytes, likewise."""
    refuses_fork: bool = False
    """Whether a process forked after its parent used the device cannot use it (CUDA's ``Cannot re-initialize CUDA
    in forked subprocess``, at its first allocation)."""
    aliases: tuple[str, ...] = ()
    """Device types the runtime translates to the device as it translates ``cuda`` (``mps``, which libraries pick
    themselves on a Mac)."""
    indexed: bool = False
    """Whether ``cuda:i`` is its device ``i`` (the target's own devices); an index past them raises CUDA's invalid
    ordinal, in checkpoints too. Else every CUDA index means its one device."""
    macos: tuple[int, int] | None = None
    """The macOS version of a Mac: MPS's limits are met on it, and ``is_mps``, ``torch.backends.mps`` and
    ``torch.mps`` answer for the device; None: not a Mac (MPS's limits, where it has them, are macOS 14's)."""

    missing: frozenset[str] = frozenset()
    """Ops (names, every overload) it has no kernel for (tests' devices)."""
    missing_overloads: frozenset[str] = frozenset()
    """Aten overloads (``aten::cummax``) it has no kernel for, refused even where torch has one for every device."""
    composed: frozenset[str] = frozenset()
    """Overloads it runs as torch's composite code does, not with a kernel of its own (MPS's)."""
    missing_as_mps: bool = False
    """Whether a missing kernel raises MPS's own ``NotImplementedError`` (the limits table's ``missing_kernel``
    row); else the dispatcher's, naming :attr:`backend`."""
    no_float64: str | None = None
    """What every op and allocation of a float64 (or complex128) tensor raises (a ``TypeError``: MPS's
    :data:`NO_FLOAT64`); None: it has them."""
    float64_ops: frozenset[str] = frozenset()
    """Ops (names) that refuse float64 even so, in MPS's words (tests' devices)."""
    limited: tuple[str, ...] = ()
    """The overloads (dispatcher names) checked before they compute: MPS's limits on :attr:`macos`, or CUDA's
    determinism alerts (:attr:`alerts`)."""
    alerts: bool = False
    """Whether :attr:`limited` are CUDA's determinism alerts (raised or warned under
    ``torch.use_deterministic_algorithms(True)``) rather than MPS's limits."""
    sparse: frozenset[str] | None = frozenset()
    """The overloads with a sparse COO kernel, the others refused; None: every one the CPU has."""
    compressed: frozenset[str] | None = None
    """The overloads with a sparse compressed (CSR, CSC, BSR, BSC) kernel; None: no sparse compressed tensors."""
    cuda_kernels: bool = False
    """Whether it has the kernels CUDA has and the CPU lacks (:mod:`.cuda_only`), and computes the composite ops with
    a branch for CUDA that no ``PrivateUse1`` backend has as the CPU does."""
    device_checks: tuple[tuple[str, str, tuple[str, ...]], ...] = ()
    """``(overload, wrapper, arguments)``: overloads (dispatcher names) whose kernel wrapper checks its tensors'
    devices before it computes, in CUDA's words: the wrapper's name and the arguments it checks (``DEVICE_CHECKS``);
    with them, convolutions check their input's and parameters' types first, as a GPU's do. None: TensorIterator's
    words for every op."""

    table_missing: frozenset[str] = frozenset()
    """The fallback engine's kernel table: overloads routed elsewhere without trying (:attr:`.Target.missing`)."""
    try_first: frozenset[str] = frozenset()
    """... overloads tried first, routed elsewhere on a refusal (:attr:`.Target.try_first`)."""
    hosted: bool = False
    """Whether the fallback engine keeps its float64 tensors on the host (:attr:`.Target.hosting`), as on a Mac,
    where :attr:`no_float64` refuses them; else the program gets the refusal."""

    features: tuple[str, ...] = ()
    """What it turns on besides (names in :data:`torchdevice.simulated.FEATURES`: a GPU's ``sharing``,
    ``memory_tools``...), in order."""

    def shown(self, index: int = 0) -> torch.device:
        """What a tensor of device ``index`` says it is on (``cuda:1``)."""
        return torch.device(self.type, index)

    @property
    def capacity(self) -> int:
        """Bytes each device holds at most (0: unbounded: the host's memory)."""
        return self.gpu.memory if self.gpu is not None else 0


def _apple(target: str) -> Profile:
    """Apple silicon as the program sees it, refusing nothing but in MPS's words: one device, its memory counted byte
    for byte and bounded by the host's, on macOS :func:`torchdevice.device.limits.macos`."""
    return Profile(target, "mps", "MPS", aliases=("mps",), macos=limits.macos(), missing_as_mps=True)


def mac(target: str = SIMULATED_MPS) -> Profile:
    """Apple silicon with the torch this package was built for: every overload of the generated kernel table
    missing, float64 refused by every op and hosted by the fallback engine, every limit of the limits table, sparse
    kernels where MPS has them."""
    from torchdevice_generated.fallback_table import COMPOSED_ON_MPS, MISSING_ON_MPS, SPARSE_ON_MPS, TRY_ON_MPS

    return replace(_apple(target), missing_overloads=MISSING_ON_MPS, composed=COMPOSED_ON_MPS,
                   no_float64=NO_FLOAT64, limited=limits.limited(), sparse=SPARSE_ON_MPS,
                   table_missing=MISSING_ON_MPS, try_first=TRY_ON_MPS, hosted=True)


def chosen(**refusing: Any) -> Profile:
    """Apple silicon refusing only ``refusing`` (:class:`Profile`'s fields): tests' and benchmarks' devices."""
    return replace(_apple(CHOSEN), **refusing)


def nvidia(devices: int = 1, gpu: Gpu | None = None) -> Profile:
    """``devices`` NVIDIA GPUs of the card ``gpu`` (by default :func:`.gpus.choose`'s) with the torch this package
    was built for: the overloads CUDA has no kernel for missing, CUDA's determinism alerts; every dtype, the CPU's
    sparse COO kernels, and its sparse compressed ones where CUDA has them (``SparseCsrCUDA``). Nothing for the
    fallback engine to complete: what a GPU refuses, the program gets."""
    from torchdevice_generated.cuda_kernels_table import DEVICE_CHECKS, MISSING_ON_CUDA, SPARSE_CSR_ON_CUDA

    return Profile(SIMULATED_CUDA, "cuda", "CUDA", devices, gpu or gpus.choose(), indexed=True,
                   missing_overloads=MISSING_ON_CUDA, limited=determinism.alerting(), alerts=True, sparse=None,
                   compressed=SPARSE_CSR_ON_CUDA, cuda_kernels=True, refuses_fork=True,
                   device_checks=tuple((name, *check) for name, check in DEVICE_CHECKS.items()),
                   features=("fit", "sharing", "memory_tools", "parallel", "libraries", "deepspeed_gpu"))


PROFILES: dict[str, Callable[[int, Gpu | None], Profile]] = {
    SIMULATED_MPS: lambda devices, gpu: mac(),  # one device: every CUDA index means it
    SIMULATED_CUDA: nvidia,
}
"""The profile of each simulated target, built from ``devices`` and a card (where the target has them)."""

_active: list[Profile] = [Profile("", "mps", "MPS")]


def active() -> Profile:
    """The profile of the simulated device installed (one device refusing nothing where none is)."""
    return _active[-1]


def activate(profile: Profile) -> None:
    """Make ``profile`` the active one until :func:`deactivate`."""
    _active.append(profile)


def deactivate(profile: Profile) -> None:
    _active.remove(profile)
