"""The simulated devices in torch: PyTorch's ``PrivateUse1`` backend, named ``simulated``, holding host memory.

Device tensors are real tensors of a backend torch knows (a ``TensorImpl`` of the ``PrivateUse1`` dispatch key,
its autograd and autocast keys): ``type(x) is torch.Tensor``, ``nn.Parameter`` stays itself, the autograd engine,
``torch.compile``, pickling and ``copy.deepcopy`` treat them as they treat any device's. Their memory is the host's:
new device memory comes from :func:`allocate`, a host result becomes a device tensor over the same memory through
:func:`device_tensor` (which keeps the host tensor alive as long as the device storage lives), and the kernels compute
on a host tensor over a device tensor's memory (:func:`host_alias`). Both are the compiled backend's (:mod:`.backend`:
its hooks, device guard, allocator and counted memory); where it cannot be built, no simulated target runs (the
runtime says why and takes the cpu target). What the program sees of them
(``x.device`` is ``mps:0``, ``cuda:1``) is :mod:`.presentation`'s; what the device is, the active profile's
(:mod:`.profile`).

Why ``PrivateUse1`` and not torch's ``MPS`` dispatch key: torch's autograd engine asks the machine's accelerator for
the streams of a device's gradients, and a build without MPS cannot be told MPS is its accelerator; a backend
registered as ``PrivateUse1`` (hooks, device guard, device module: torch's own extension points) can.

:func:`register` makes the backend once per process (torch cannot unregister one), and :func:`configure` gives it a
profile's devices at each installation; it then costs nothing while no simulated device is installed. The devices'
default random generators (:data:`GENERATORS`) and the bytes of their live allocations (:func:`memory`) are the
simulated hardware's, per process, as a GPU's are.
"""

from __future__ import annotations

import threading
import types
from typing import Any

import torch

from torchdevice.device import cuda_memory, gpus
from torchdevice.simulated import alloc_conf, backend
from torchdevice.simulated.profile import Profile, active

NAME = "simulated"
"""The backend's name, whatever the profile (a device prints as ``simulated:0`` where torch's C++ names it)."""
MAX_DEVICES = 16
"""The most devices a profile may have (the compiled backend's)."""
CPU = torch.device("cpu")
GENERATORS = tuple(torch.Generator() for _ in range(MAX_DEVICES))
"""Each device's default generator: what its random ops draw from when given none (a Mac's MPS generator)."""
GENERATOR = GENERATORS[0]

_lock = threading.Lock()
_ops = torch.ops.torchdevice_sim
_powered: list[int] = [0]
"""How many registrations of the device's kernels are alive: the device is available while one is."""


def register() -> torch.device:
    """Make ``PrivateUse1`` the simulated device in this process (once; later calls return it); raises when another
    backend holds ``PrivateUse1``, or where the compiled backend cannot be had (the runtime asks
    :func:`.backend.loadable` before it gets here)."""
    with _lock:
        name = torch._C._get_privateuse1_backend_name()
        if name == NAME:
            return torch.device(NAME, 0)
        if name != "privateuseone":
            raise RuntimeError(f"torchdevice: the simulated devices need PyTorch's PrivateUse1 backend, which this "
                               f"program gave to {name!r}")
        if not backend.loadable():
            raise RuntimeError(f"torchdevice: the simulated devices need their compiled backend, which cannot be had: "
                               f"{backend.why_not()}; --target cpu runs there")
        _ops.register_backend(list(GENERATORS))
        torch.utils.rename_privateuse1_backend(NAME)
        torch._register_device_module(NAME, _device_module())
        return torch.device(NAME, 0)


def configure(profile: Profile) -> None:
    """Give the registered backend ``profile``'s devices: their number, name and memory."""
    _ops.configure(profile.devices, profile.type, profile.block, profile.segment, profile.gpu is not None,
                   profile.refuses_fork, [profile.capacity] * profile.devices)
    if profile.gpu is not None:
        use_settings(alloc_conf.settings(), profile.devices)
    select(0)


def use_settings(conf: alloc_conf.Settings, devices: int) -> None:
    """The GPUs' caching allocator decides by ``conf`` from now on (its ``per_process_memory_fraction``, where
    given, bounds each of the ``devices``)."""
    _ops.configure_caching(conf.max_split, conf.max_non_split_rounding, conf.large_segment, list(conf.divisions),
                           conf.gc_threshold, conf.error)
    for index in range(devices if conf.fraction is not None else 0):
        _ops.set_memory_fraction(index, conf.fraction)


def current() -> int:
    """This thread's current device (``torch.cuda.current_device()``; the compiled backend's guard keeps it)."""
    return torch._C._accelerator_hooks_get_current_device()


def select(index: int) -> None:
    """Make device ``index`` this thread's current one (``torch.cuda.set_device``)."""
    torch._C._accelerator_hooks_set_current_device(index)


def device_tensor(host: torch.Tensor, index: int = -1) -> torch.Tensor:
    """A device tensor of device ``index`` (-1: the current one) over ``host``'s memory (same sizes, strides and
    dtype), which keeps ``host`` alive."""
    return _ops.wrap.default(host, index)


def host_alias(t: torch.Tensor) -> torch.Tensor:
    """A host tensor over device tensor ``t``'s memory (same storage bytes, offset, sizes and strides)."""
    storage = t.untyped_storage()
    alias = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), CPU, storage.nbytes())
    return torch.empty(0, dtype=t.dtype).set_(alias, t.storage_offset(), t.shape, t.stride())


def host_bytes(storage: torch.UntypedStorage) -> torch.Tensor:
    """A host ``uint8`` tensor over a device storage's bytes."""
    alias = torch._C._construct_storage_from_data_pointer(storage.data_ptr(), CPU, storage.nbytes())
    return torch.empty(0, dtype=torch.uint8).set_(alias)


def allocate(size: tuple[int, ...] | list[int], stride: tuple[int, ...] | list[int] | None,
             dtype: torch.dtype, index: int = -1) -> torch.Tensor:
    """New memory of device ``index`` (-1: the current one) for a tensor of ``size`` and ``stride`` (contiguous when
    None): counted while it lives."""
    if stride is None:
        stride = torch._prims_common.make_contiguous_strides_for(size)
    return _ops.empty_strided.default(size, stride, dtype, index)


def power(on: bool) -> None:
    """Count a registration of the device's kernels in (``on``) or out: torch's own code sees the device available
    (``torch.accelerator.is_available()``, DataLoader's pinning) only while it has kernels."""
    with _lock:
        _powered[0] += 1 if on else -1


def memory(index: int = 0) -> tuple[int, int, int, int, int, int]:
    """Device ``index``'s memory as its allocator counts it (:mod:`.profile`): live, peak, reserved and peak reserved
    bytes, allocations and frees."""
    return tuple(_ops.memory_stats.default(index))  # type: ignore[return-value]


def allocated() -> int:
    """Bytes of the first device's live memory (``torch.mps.current_allocated_memory()`` on a Mac)."""
    return memory(0)[0]


def _device_module() -> types.ModuleType:
    """``torch.simulated``: what torch's own code asks of a backend's device module."""
    module = types.ModuleType(f"torch.{NAME}", "The simulated devices' module (torchdevice).")
    module.is_available = lambda: _powered[0] > 0  # type: ignore[attr-defined]
    module.is_initialized = lambda: True  # type: ignore[attr-defined]
    module._is_in_bad_fork = lambda: False  # type: ignore[attr-defined]
    module._lazy_init = lambda: None  # type: ignore[attr-defined]
    module.device_count = lambda: active().devices  # type: ignore[attr-defined]
    module.current_device = current  # type: ignore[attr-defined]
    module.synchronize = lambda device=None: None  # type: ignore[attr-defined]
    module.get_amp_supported_dtype = lambda: [torch.float16, torch.bfloat16]  # type: ignore[attr-defined]
    module.get_rng_state = lambda device=None: _generator(device).get_state()  # type: ignore[attr-defined]
    module.set_rng_state = lambda state, device=None: _generator(device).set_state(state)  # type: ignore[attr-defined]
    module.manual_seed = lambda seed: _generator(None).manual_seed(int(seed))  # type: ignore[attr-defined]
    module.manual_seed_all = lambda seed: [g.manual_seed(int(seed)) for g in GENERATORS]  # type: ignore[attr-defined]
    return module


def gpu_memory() -> list[dict[str, Any]]:
    """Each simulated GPU of this process as the report reads it (none where the device is not a GPU): its card, the
    card's memory, its allocator's peaks, out-of-memory errors and retries, and whether its peaks fit each card of
    the table (:func:`torchdevice.device.gpus.verdict`)."""
    gpu = active().gpu
    if gpu is None:
        return []
    found = []
    for index in range(active().devices):
        stats = cuda_memory.nested(OWN.allocator_stats(index))
        reserved, allocated = stats["reserved_bytes"]["all"]["peak"], stats["allocated_bytes"]["all"]["peak"]
        found.append({"device": index, "card": gpu.key, "total": active().capacity, "peak_reserved": reserved,
                      "peak_allocated": allocated, "num_ooms": stats["num_ooms"],
                      "num_alloc_retries": stats["num_alloc_retries"],
                      "cards": {key: {"memory": card.memory, "verdict": gpus.verdict(reserved, allocated, card.memory)}
                                for key, card in gpus.CARDS.items()}})
    return found


class _Own:
    """The devices as a target's own (:class:`torchdevice.device.target.OwnDevices`)."""

    generators = GENERATORS

    @staticmethod
    def memory(index: int) -> tuple[int, int, int, int, int, int]:
        return memory(index)

    @staticmethod
    def reset_peaks(index: int) -> None:
        _ops.reset_peaks(index)

    @staticmethod
    def empty_cache(index: int) -> None:
        _ops.empty_cache(index)

    @staticmethod
    def allocator_stats(index: int) -> list[int]:
        """CUDA's allocator's statistics of a GPU's device ``index`` (``caching_allocator.h``: ``Device::stats``)."""
        return list(_ops.allocator_stats(index))

    @staticmethod
    def allocator_snapshot(index: int) -> cuda_memory.Part:
        """Its segments and their blocks, its trace, and where each was made, likewise (``Device::snapshot``)."""
        return _ops.allocator_snapshot(index)  # type: ignore[no-any-return]

    @staticmethod
    def record_history(enabled: str | None, context: str | None, stacks: str, max_entries: int,
                       clear_history: bool, skip_actions: list[str]) -> None:
        """``torch.cuda.memory._record_memory_history``'s settings, for every device (:mod:`.memory_tools`)."""
        _ops.record_history(enabled, context, stacks, min(max_entries, (1 << 63) - 1), clear_history, skip_actions)

    @staticmethod
    def reset_accumulated(index: int) -> None:
        _ops.reset_accumulated(index)

    @staticmethod
    def set_memory_fraction(index: int, fraction: float) -> None:
        _ops.set_memory_fraction(index, fraction)

    @staticmethod
    def select(index: int) -> None:
        select(index)


OWN = _Own()


def _generator(device: Any) -> torch.Generator:
    """The default generator of ``device`` (an index, a device; None: the current one)."""
    index = device.index if isinstance(device, torch.device) else device
    return GENERATORS[current() if index is None or index < 0 else index]
