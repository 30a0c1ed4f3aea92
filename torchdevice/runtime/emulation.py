"""The ``torch.cuda`` namespace on a machine without CUDA: the implementations behind the emulation vocabulary.

``catalog/overlays/cuda.yaml`` says, for each public ``torch.cuda`` entry, which word of the vocabulary stands
in for it (``does``) and with which ``value``; the generated ``torchdevice_generated.cuda_table`` carries that
to the runtime, which installs ``Emulation.build(does, value, name)`` in place of the entry. The words are the
methods (and classes) of :class:`Emulation` marked ``@word`` (the object installed) or ``@builder`` (called with
the ``value``); one :class:`Emulation` serves one installation and holds its streams and memory fraction. The
emulated device is the target (MPS or CPU):

* availability: N devices (``TORCHDEVICE_DEVICES``, default 1; see
  :func:`torchdevice.runtime.device_maps.resolve_devices`), always initialised, each of them the target;
  ``set_device`` and ``with torch.cuda.device(k)`` select the current one per thread, as CUDA does;
  an index of no emulated device raises CUDA's error; torch's own code still sees no CUDA (see
  :mod:`torchdevice.callers`);
* random numbers: on the CPU target each emulated device has its own generator, apart from the host's
  (``torch.cuda.manual_seed`` seeds what ``torch.randn(..., device="cuda")`` draws from and leaves
  ``torch.randn(3)`` alone); on MPS the CUDA generator is MPS's default generator;
* memory statistics: on MPS what ``torch.mps`` reports (current and driver-allocated bytes; MPS keeps
  no peak, so ``max_*`` report the current value); on the CPU target the bytes of the live storages
  made on each emulated device and their peak (:mod:`torchdevice.device.residence`), and
  ``mem_get_info`` reports the system's free and total memory;
* streams are in-order queues that are always complete; events time with a host clock after
  synchronising the target, so ``elapsed_time`` measures what ran between two ``record()`` calls.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from torchdevice.callers import told_the_truth
from torchdevice.device import cuda_memory
from torchdevice.device.aten import cpp_device
from torchdevice.device.host import system_memory
from torchdevice.device.placement import invalid_ordinal
from torchdevice.device.residence import device_index
from torchdevice.runtime.graphs import CUDAGraph, capturing, graph, graph_pool_handle, make_graphed_callables
from torchdevice.runtime.vocabulary import WORDS, builder, word

if TYPE_CHECKING:
    from torchdevice.runtime.installation import Installation


_CUDA_SUMMARY = torch.cuda.memory.memory_summary
"""torch's own ``memory_summary``: CUDA's table, of what ``torch.cuda.memory.memory_stats`` gives."""

for _graphs in (CUDAGraph, graph, graph_pool_handle, make_graphed_callables, capturing):
    assert _graphs.__name__ in WORDS  # :mod:`.graphs`' words, found here by name


def unsupported(name: str, why: str, is_class: bool, target: torch.device) -> Any:
    """A stand-in for ``name`` that raises, naming the entry, the target and the reason, when used."""

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{name} is not supported on target {target.type!r} by torchdevice: {why}")

    if not is_class:
        fail.__name__ = fail.__qualname__ = name.rpartition(".")[2]
        return fail
    return type(name.rpartition(".")[2], (), {"__new__": fail, "__doc__": f"Unsupported: {why}"})


class Emulation:
    """The ``torch.cuda`` namespace of one installation: its words, its streams and its memory fraction."""

    def __init__(self, installation: Installation) -> None:
        self.installation = installation
        self.target = installation.device
        self.shown = installation.target.shown or self.target
        """The target as the program sees it (the simulated Mac's ``mps:0``)."""
        self.on_mps = installation.target.mps
        """Whether the target is Apple silicon (``torch.mps`` answers for its memory, generator and synchronisation;
        the simulated Mac's ``torch.mps`` is the simulation's)."""
        self.gpu = installation.target.gpu
        """The card a simulated GPU is (its name, capability, memory); None on other targets."""
        self.own = installation.target.own
        """The target's own devices, which count their memory and draw from their own generators (the simulated
        GPUs'); None on other targets."""
        self.streams: dict[str, Stream] = {}
        self.memory_fraction = 1.0
        self._built: dict[tuple[str, str, str], Any] = {}
        self.classes = {cls.__name__: type(cls.__name__, (cls,), {"em": self, "__module__": "torch.cuda",
                                                                  "__qualname__": cls.__qualname__})
                        for cls in (device, device_of, Event, Stream, StreamContext)}
        """The word classes bound to this emulation (``torch.cuda.Event`` and kin)."""

    def build(self, does: str, value: Any, name: str) -> Any:
        """The object that stands in for torch entry ``name`` under the vocabulary word ``does`` (the same object
        for the same arguments)."""
        key = (does, repr(value), name)
        if key not in self._built:
            kind = WORDS.get(does)
            if kind is None:
                raise LookupError(f"torchdevice: no emulation {does!r} (for {name}); known: {', '.join(sorted(WORDS))}")
            found = self.classes.get(does) or getattr(self, does, None) or globals()[does]
            built = found(value) if kind == "builder" else found
            self._built[key] = _own_function(name, built) if name.startswith("torch.accelerator.") else built
        return self._built[key]

    # -- generic words ---------------------------------------------------------------------------

    @word
    @staticmethod
    def noop(*args: Any, **kwargs: Any) -> None:
        """Accept anything, do nothing (nothing to do on the target)."""

    @word
    @staticmethod
    @contextlib.contextmanager
    def null_context(*args: Any, **kwargs: Any) -> Iterator[None]:
        """A context manager (and decorator) that does nothing."""
        yield

    @builder
    @staticmethod
    def constant(value: Any) -> Callable[..., Any]:
        """A function that accepts anything and returns (a fresh copy of) ``value``."""

        def fixed(*args: Any, **kwargs: Any) -> Any:
            return type(value)(value) if isinstance(value, (list, dict)) else value

        return fixed

    # -- devices ---------------------------------------------------------------------------------

    @word
    @staticmethod
    def is_available() -> bool:
        """True for the program and its libraries; torch's own code gets the real answer (no CUDA)."""
        return not told_the_truth("cuda.is_available")

    @word
    @staticmethod
    def is_initialized() -> bool:
        """Like :meth:`is_available`: the emulated device is ready as soon as it is available."""
        return not told_the_truth("cuda.is_initialized")

    @word
    def device_count(self) -> int:
        """The emulated devices for the program; torch's own code sees none."""
        return 0 if told_the_truth("cuda.device_count") else self.installation.emulated

    @word
    def current_device(self) -> int:
        return self.installation.current()

    def index(self, device: Any) -> int:
        """The CUDA device index ``device`` names (the current one for ``None``, a negative index or a device
        without index); an index of no emulated device raises CUDA's error."""
        if isinstance(device, str):
            device = torch.device(device)
        if isinstance(device, torch.device):
            if device.type not in ("cuda", self.target.type, self.shown.type):
                raise ValueError(f"Expected a cuda device, but got: {device}")
            device = device.index
        if device is None:
            return self.current_device()
        if not isinstance(device, int) or isinstance(device, bool):
            raise ValueError(f"Expected a cuda device, but got: {device!r}")
        if device < 0:
            return self.current_device()
        if device >= self.installation.emulated:
            raise invalid_ordinal(device, self.installation.emulated)
        return device

    def property_index(self, device: Any) -> int:
        """:meth:`index` for the device property queries, which CUDA answers with an ``AssertionError``."""
        try:
            return self.index(device)
        except torch.AcceleratorError:
            raise AssertionError("Invalid device id") from None

    @word
    def set_device(self, device: Any) -> None:
        """Make ``device`` this thread's current device (a negative index: no change)."""
        self.installation.selected.index = index = self.index(device)
        if self.own is not None:
            self.own.select(index)

    @word
    def get_device_name(self, device: Any = None) -> str:
        self.property_index(device)
        if self.gpu is not None:
            return self.gpu.name
        if self.on_mps:
            return "Apple MPS (torchdevice)"
        return f"{platform.processor() or platform.machine()} CPU (torchdevice)"

    @word
    def get_device_properties(self, device: Any = None) -> DeviceProperties:
        major, minor = self.get_device_capability(device)
        total = self.mem_get_info(device)[1]
        name = self.get_device_name(device)
        if self.gpu is not None:
            return DeviceProperties(name, major, minor, total, self.gpu.multiprocessors, is_integrated=False)
        return DeviceProperties(name, major, minor, total, os.cpu_count() or 1)

    @word
    def get_device_capability(self, device: Any = None) -> tuple[int, int]:
        self.property_index(device)
        return self.gpu.capability if self.gpu is not None else CAPABILITY

    @word
    def is_bf16_supported(self, including_emulation: bool = True) -> bool:
        if self.gpu is not None:  # as CUDA answers: natively from Ampere (8.0) on, else by emulation where asked
            return self.gpu.capability >= (8, 0) or including_emulation
        return torch.backends.mps.is_macos_or_newer(14, 0) if self.on_mps else True

    @word
    def synchronize(self, device: Any = None) -> None:
        """Wait for the target: ``torch.mps.synchronize()``; CPU work is already complete."""
        self.index(device)
        if self.on_mps:
            torch.mps.synchronize()

    @word
    def list_gpu_processes(self, device: Any = None) -> str:
        return f"GPU:{self.index(device)}\nno processes are running (emulated on {self.shown.type})"

    # -- streams ---------------------------------------------------------------------------------

    def _default(self) -> Stream:
        return self.streams.setdefault("default", self.classes["Stream"]())

    @word
    def default_stream(self, device: Any = None) -> Stream:
        self.index(device)
        return self._default()

    @word
    def current_stream(self, device: Any = None) -> Stream:
        self.index(device)
        return self.streams.get("current") or self._default()

    @word
    def set_stream(self, stream: Stream | None) -> None:
        if stream is not None:
            self.streams["current"] = stream

    @word
    def stream(self, stream: Stream | None) -> StreamContext:
        return self.classes["StreamContext"](stream)

    # -- memory ----------------------------------------------------------------------------------

    def _own_memory(self, device: Any) -> tuple[int, ...]:
        """The target's own device's counters of ``device`` (live, peak, reserved, peak reserved bytes, allocations,
        frees); asked only where it has its own devices."""
        assert self.own is not None
        return self.own.memory(self.index(device))

    def _allocated(self, device: Any) -> int:
        """Bytes of device memory: on MPS what ``torch.mps`` counts and the hosted tensors' data."""
        if self.own is not None:
            return self._own_memory(device)[0]
        if self.on_mps:
            hosting = self.installation.hosting
            return torch.mps.current_allocated_memory() + (hosting.allocated if hosting is not None else 0)
        return self.installation.ledger.allocated[self.index(device)]

    def _peak(self, device: Any) -> int:
        """MPS keeps no peak: its current value stands in."""
        if self.own is not None:
            return self._own_memory(device)[1]
        return self._allocated(device) if self.on_mps else self.installation.ledger.peak[self.index(device)]

    def _reserved(self, device: Any) -> int:
        """Bytes the allocator holds; on the CPU, which caches nothing, what live device tensors hold."""
        if self.own is not None:
            return self._own_memory(device)[2]
        return torch.mps.driver_allocated_memory() if self.on_mps else self._allocated(device)

    @word
    def memory_allocated(self, device: Any = None) -> int:
        """Bytes held by device tensors: on the CPU target, the live storages made on that emulated device
        (:mod:`torchdevice.device.residence`); ``torch.mps.current_allocated_memory()`` on MPS."""
        return self._allocated(device)

    @word
    def max_memory_allocated(self, device: Any = None) -> int:
        """The peak of :meth:`memory_allocated` since the start or :meth:`reset_peak_memory_stats`."""
        return self._peak(device)

    @word
    def memory_reserved(self, device: Any = None) -> int:
        """Bytes held by the allocator: ``torch.mps.driver_allocated_memory()``; on the CPU what device tensors
        hold."""
        return self._reserved(device)

    @word
    def max_memory_reserved(self, device: Any = None) -> int:
        if self.own is not None:
            return self._own_memory(device)[3]
        return self._reserved(device) if self.on_mps else self._peak(device)

    @word
    def reset_peak_memory_stats(self, device: Any = None) -> None:
        if self.own is not None:
            self.own.reset_peaks(self.index(device))
        elif not self.on_mps:
            self.installation.ledger.reset_peak(self.index(device))

    def _caching(self) -> bool:
        """Whether the target's memory is CUDA's caching allocator's (a simulated GPU's)."""
        return self.own is not None and self.gpu is not None

    @word
    def memory_stats(self, device: Any = None) -> dict[str, int]:
        """A simulated GPU's: CUDA's (:mod:`torchdevice.device.cuda_memory`); elsewhere the allocator statistics
        that have a counterpart on the target (current and peak bytes)."""
        if self._caching():
            assert self.own is not None
            return cuda_memory.flat(self.own.allocator_stats(self.index(device)))
        current = {"allocated_bytes": self.memory_allocated(device), "reserved_bytes": self.memory_reserved(device),
                   "active_bytes": self.memory_allocated(device)}
        peak = {"allocated_bytes": self.max_memory_allocated(device),
                "reserved_bytes": self.max_memory_reserved(device), "active_bytes": self.max_memory_allocated(device)}
        stats = {}
        for key in current:
            stats[f"{key}.all.current"], stats[f"{key}.all.peak"] = current[key], peak[key]
        stats.update(num_alloc_retries=0, num_ooms=0)
        if self.own is not None:
            allocations, frees = self._own_memory(device)[4:]
            stats.update({"allocation.all.allocated": allocations, "allocation.all.freed": frees,
                          "allocation.all.current": allocations - frees})
        return dict(sorted(stats.items()))

    @word
    def memory_stats_as_nested_dict(self, device: Any = None) -> dict[str, Any]:
        if self._caching():
            assert self.own is not None
            return cuda_memory.nested(self.own.allocator_stats(self.index(device)))
        nested: dict[str, Any] = {}
        for key, value in self.memory_stats(device).items():
            *path, leaf = key.split(".")
            node = nested
            for part in path:
                node = node.setdefault(part, {})
            node[leaf] = value
        return nested

    @word
    def memory_summary(self, device: Any = None, abbreviated: bool = False) -> str:
        """A simulated GPU's: torch's own table of CUDA's statistics (it reads them through
        ``torch.cuda.memory.memory_stats``, this emulation's); elsewhere the statistics the target has, listed."""
        if self._caching():
            return _CUDA_SUMMARY(self.index(device), abbreviated)
        lines = [f"torchdevice memory summary (CUDA emulated on {self.shown.type})"]
        lines += [f"  {key:<32} {value:>16,}" for key, value in self.memory_stats(device).items()]
        return "\n".join(lines)

    @word
    def mem_get_info(self, device: Any = None) -> tuple[int, int]:
        """``(free, total)`` bytes: MPS's recommended working set less what its driver holds; system memory on
        CPU."""
        if self.gpu is not None:
            return self.gpu.memory - self._reserved(device), self.gpu.memory
        self.index(device)
        if self.on_mps:
            total = torch.mps.recommended_max_memory()
            return max(total - torch.mps.driver_allocated_memory(), 0), total
        return system_memory()

    @word
    def memory_snapshot(self) -> list[dict[str, Any]]:
        """A simulated GPU's segments and blocks, as CUDA's snapshot has them, of every device; none elsewhere."""
        if not self._caching():
            return []
        assert self.own is not None
        parts = [self.own.allocator_snapshot(i) for i in range(self.installation.emulated)]
        return cuda_memory.snapshot(parts, {}, traces=False)["segments"]  # type: ignore[no-any-return]

    @word
    def reset_accumulated_memory_stats(self, device: Any = None) -> None:
        index = self.index(device)
        if self._caching():
            assert self.own is not None
            self.own.reset_accumulated(index)

    @word
    def empty_cache(self) -> None:
        if self.own is not None:
            for index in range(self.installation.emulated):
                self.own.empty_cache(index)
        elif self.on_mps:
            torch.mps.empty_cache()

    @word
    def set_per_process_memory_fraction(self, fraction: float, device: Any = None) -> None:
        self.index(device)
        if not isinstance(fraction, float):
            raise TypeError("Invalid type for fraction argument, must be `float`")
        if not 0 <= fraction <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        if self.on_mps:
            torch.mps.set_per_process_memory_fraction(fraction)
        if self._caching():
            assert self.own is not None
            self.own.set_memory_fraction(self.index(device), fraction)
        self.memory_fraction = fraction

    @word
    def get_per_process_memory_fraction(self, device: Any = None) -> float:
        self.index(device)
        return self.memory_fraction

    # -- backends --------------------------------------------------------------------------------

    @word
    @staticmethod
    def preferred_linalg_library(backend: Any = None) -> Any:
        """Accept any choice (cuSOLVER and MAGMA are CUDA libraries); report the backend in use."""
        return torch._C._get_linalg_preferred_backend()

    # -- random numbers --------------------------------------------------------------------------

    def generator(self, device: Any = None) -> torch.Generator:
        """The emulated CUDA generator of ``device``: on MPS the target's default generator; on the CPU one
        generator per emulated device, apart from the host's (see :class:`~.installation.Installation`)."""
        if self.own is not None:
            return self.own.generators[self.index(device)]
        if self.on_mps:
            return torch.mps._get_default_mps_generator()
        return self.installation.generators[self.index(device)]

    def _all_generators(self) -> tuple[torch.Generator, ...]:
        if self.own is not None:
            return self.own.generators[:self.installation.emulated]
        if self.on_mps:
            return (self.generator(),) * self.installation.emulated
        return self.installation.generators

    @word
    def manual_seed(self, seed: int) -> None:
        self.generator().manual_seed(int(seed))

    @word
    def manual_seed_all(self, seed: int) -> None:
        for generator in self._all_generators():
            generator.manual_seed(int(seed))

    @word
    def seed(self) -> None:
        self.generator().seed()

    @word
    def seed_all(self) -> None:
        """A random seed, the same for every emulated device, as CUDA's ``seed_all`` does."""
        generators = self._all_generators()
        chosen = generators[0].seed()
        for generator in generators[1:]:
            generator.manual_seed(chosen)

    @word
    def initial_seed(self) -> int:
        return self.generator().initial_seed()

    @word
    def get_rng_state(self, device: Any = "cuda") -> torch.Tensor:
        return self.generator(device).get_state()

    @word
    def get_rng_state_all(self) -> list[torch.Tensor]:
        return [generator.get_state() for generator in self._all_generators()]

    @word
    def set_rng_state(self, new_state: torch.Tensor, device: Any = "cuda") -> None:
        self.generator(device).set_state(new_state)

    @word
    def set_rng_state_all(self, new_states: Any) -> None:
        for generator, state in zip(self._all_generators(), new_states, strict=False):
            generator.set_state(state)

    @builder
    def default_generators(self, value: Any) -> tuple[torch.Generator, ...]:
        """``torch.cuda.default_generators``: one generator per emulated device (MPS's one generator on MPS)."""
        return self._all_generators()

    # -- legacy tensor types ---------------------------------------------------------------------

    @builder
    def tensor_type(self, value: str) -> type:
        """``torch.cuda.FloatTensor`` and kin: the CPU legacy constructor, moved to the target.

        ``value`` is the dtype name (``"float32"``); ``isinstance`` checks dtype and device; one class
        per dtype, so ``Tensor.type(torch.cuda.HalfTensor)`` (see :mod:`torchdevice.runtime.tensors`) knows it.
        """
        dtype = getattr(torch, value)
        name = torch.tensor([], dtype=dtype).type().removeprefix("torch.")  # "FloatTensor"
        cpu_type = getattr(torch, name)
        installation, target = self.installation, self.target

        class Meta(type):
            def __call__(cls, *args: Any, **kwargs: Any) -> torch.Tensor:
                made = cpu_type(*args, **kwargs)
                return made.to(target) if target.type != "cpu" else installation.born(made, "cuda")

            def __instancecheck__(cls, instance: object) -> bool:
                if not isinstance(instance, torch.Tensor) or instance.dtype != dtype:
                    return False
                on_device = cpp_device(instance).type == target.type
                return on_device if target.type != "cpu" else device_index(instance) is not None

        return Meta(name, (), {"dtype": dtype, "is_cuda": True, "__module__": "torch.cuda"})

    # -- torch.accelerator: the emulated CUDA is the accelerator ---------------------------------

    @word
    @staticmethod
    def current_accelerator(check_available: bool = False) -> torch.device | None:
        """``cuda`` for the program and its libraries (always available); torch's own code gets the real
        answer (none), as for :meth:`is_available`."""
        return None if told_the_truth("accelerator.current_accelerator") else torch.device("cuda")

    @word
    def accelerator_capability(self, device: Any = None, /) -> dict[str, Any]:
        """``torch.accelerator.get_device_capability``: the dtypes whose tensors the target can hold."""
        self.index(device)
        return {"supported_dtypes": set(_target_dtypes(self.target.type))}

    @builder
    @staticmethod
    def deprecated_alias(value: str) -> Callable[..., Any]:
        """A deprecated name of ``torch.accelerator.<value>``: warns as torch does, then calls it."""

        def alias(*args: Any, **kwargs: Any) -> Any:
            warnings.warn(f"Use `{value}` instead.", FutureWarning, stacklevel=2)
            return getattr(torch.accelerator, value)(*args, **kwargs)

        return alias


@dataclass(frozen=True)
class DeviceProperties:
    """What ``torch.cuda.get_device_properties`` reports for the emulated device."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    is_integrated: bool = True
    is_multi_gpu_board: bool = False
    warp_size: int = 32
    L2_cache_size: int = 0
    gcnArchName: str = ""


CAPABILITY = (8, 0)
"""The compute capability reported: that of a device supporting bf16, which the targets do."""


# -- the word classes: each installation binds a subclass to its emulation (``em``) ----------------


@word
class device:
    """Context manager that makes ``device`` the current device, and the previous one again on exit."""

    em: Emulation

    def __init__(self, device: Any) -> None:
        self.idx = self.em.index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = self.em.current_device()
        self.em.set_device(self.idx)

    def __exit__(self, *exc: object) -> None:
        self.em.set_device(self.prev_idx)


@word
class device_of(device):
    """Context manager that selects the device of a tensor: its emulated device, else the current one."""

    def __init__(self, obj: Any) -> None:
        super().__init__(device_index(obj) if isinstance(obj, torch.Tensor) else None)


@word
class Event(torch.Event):
    """A CUDA event on the emulated device: ``record`` synchronises the target and reads a host clock.

    A ``torch.Event`` (of the CPU, which cannot record by itself), so ``isinstance`` checks hold.
    """

    em: Emulation

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> Event:
        return super().__new__(cls, "cpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._device = self.em.shown
        self._time_ns: int | None = None

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return self._device

    @property
    def cuda_event(self) -> int:
        """A ``cudaEvent_t``: there is none (0)."""
        return 0

    def record(self, stream: Any = None) -> None:
        self.em.synchronize()
        self._time_ns = time.perf_counter_ns()

    def wait(self, stream: Any = None) -> None:
        """Make ``stream`` wait for this event: work on the target is in order, nothing to wait for."""

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        self.em.synchronize()

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds between this event's and ``end_event``'s ``record()``."""
        if not (self.enable_timing and getattr(end_event, "enable_timing", False)):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")
        end = getattr(end_event, "_time_ns", None)
        if self._time_ns is None or end is None:
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        return (end - self._time_ns) / 1e6

    def ipc_handle(self) -> Any:
        raise NotImplementedError("Event.ipc_handle is not supported by torchdevice: events are not shared")

    @classmethod
    def from_ipc_handle(cls, device: Any, handle: Any) -> Event:
        raise NotImplementedError("Event.from_ipc_handle is not supported by torchdevice: events are not shared")

    def __repr__(self) -> str:
        return "<torch.cuda.Event (emulated)>"


@word
class Stream:
    """A CUDA stream on the emulated device: work runs in order, so a stream is always complete."""

    em: Emulation

    _made = 0
    """Streams made so far: each one's ``stream_id`` (the default stream's is 0, as CUDA's)."""

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        least, greatest = self.priority_range()
        Stream._made += 1
        self._index, self._shown, self._id = self.em.index(device), self.em.shown, Stream._made
        self._priority = min(max(priority, greatest), least)  # CUDA clamps a priority into its range

    @property
    def device(self) -> torch.device:
        return self._shown

    @property
    def device_index(self) -> int:
        return self._index

    @property
    def device_type(self) -> int:
        """The device type as C++ numbers it (``c10::DeviceType::CUDA``)."""
        return 1

    @property
    def priority(self) -> int:
        return self._priority

    @property
    def stream_id(self) -> int:
        return self._id

    @property
    def cuda_stream(self) -> int:
        """A ``cudaStream_t``: there is none (0, the null stream's)."""
        return 0

    @property
    def native_handle(self) -> int:
        return self.cuda_stream

    @staticmethod
    def priority_range() -> tuple[int, int]:
        """(least, greatest): the range torch supports on CUDA (``c10/cuda/CUDAStream.h``: 0 to
        ``1 - max_compile_time_stream_priorities``)."""
        return (0, -3)

    def is_capturing(self) -> bool:
        """Whether a CUDA graph capture is under way (on this thread's stream)."""
        return capturing()

    def wait_event(self, event: Event) -> None:
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        """Nothing to wait for: every stream is complete."""

    def record_event(self, event: Event | None = None) -> Event:
        event = self.em.classes["Event"]() if event is None else event
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        self.em.synchronize()

    def __enter__(self) -> Stream:
        """``with stream:`` makes it current until the block ends, as ``torch.Stream`` does."""
        self.previous = self.em.current_stream()
        self.em.set_stream(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.em.set_stream(self.previous)

    def __repr__(self) -> str:
        return f"<torch.cuda.Stream (emulated) priority={self.priority}>"


@word
class StreamContext:
    """Context manager that makes ``stream`` current."""

    em: Emulation

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self.prev: Stream | None = None

    def __enter__(self) -> None:
        if self.stream is not None:
            self.prev = self.em.current_stream()
            self.em.set_stream(self.stream)

    def __exit__(self, *exc: object) -> None:
        if self.stream is not None:
            self.em.set_stream(self.prev)


@word
class autocast(torch.amp.autocast_mode.autocast):
    """``torch.cuda.amp.autocast(...)``: ``torch.autocast("cuda", ...)`` as PyTorch's deprecation note says.

    Without a ``dtype`` it takes CUDA's autocast dtype (float16 unless the program set another), as
    ``torch.autocast("cuda")`` does under the runtime (:mod:`torchdevice.runtime.amp`).
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True) -> None:
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


@functools.cache
def _target_dtypes(device_type: str) -> frozenset[torch.dtype]:
    dtypes = {value for value in vars(torch).values() if isinstance(value, torch.dtype)}
    held = set()
    with warnings.catch_warnings():  # deprecated and experimental dtypes say so
        warnings.simplefilter("ignore")
        for dtype in dtypes:
            try:
                torch.empty(0, dtype=dtype, device=device_type)
            except (RuntimeError, TypeError):
                continue
            held.add(dtype)
    return frozenset(held)


def _own_function(name: str, built: Any) -> Any:
    """A function of its own for ``torch.accelerator.<name>``, doing what ``built`` does.

    In torch, ``torch.accelerator.synchronize`` and ``torch.cuda.synchronize`` are distinct objects, and
    Dynamo registers a handler for each: one object under both names stops it. The copy shares the code
    (and, for a method, is bound to the same emulation), so it answers callers exactly as ``built`` does."""
    function = built.__func__ if isinstance(built, types.MethodType) else built
    if not isinstance(function, types.FunctionType):
        return built
    own = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                             function.__closure__)
    own.__kwdefaults__ = function.__kwdefaults__
    functools.update_wrapper(own, function, updated=())
    return types.MethodType(own, built.__self__) if isinstance(built, types.MethodType) else own
