"""torch's memory tools on a simulated GPU, as on a GPU: the memory history (``torch.cuda.memory.
_record_memory_history``, ``_snapshot``, ``_dump_snapshot``, and the tools that read them: ``torch.cuda._memory_viz``,
the memory viewer), the allocator's settings changed while the program runs (``torch.cuda.memory.
_set_allocator_settings``) and out-of-memory observers (``torch._C._cuda_attach_out_of_memory_observer``).

torch's Python reaches CUDA's allocator for them through functions of its C module, which a build without CUDA lacks and
a CUDA build without a GPU refuses ("Found no NVIDIA driver"). On a simulated GPU they are the backend's: its caching
allocator keeps where each block and segment was allocated and a trace of its actions (``caching_allocator.h``), as
CUDA's does, and takes new settings as CUDA's takes them (each key given replaces its value, the others stay), and calls
the out-of-memory observers before raising CUDA's error; torch's own Python around them (each release's own arguments)
runs as it is. What differs from a GPU's: frames are Python's only (``stacks="all"`` also gathers C++ frames on a GPU,
which here would be the simulation's), trace entries have no ``compile_context`` or ``user_metadata``, no ``snapshot``
entries are recorded, and an observer's exception is printed instead of raised in place of the out-of-memory error.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.device import cuda_memory
from torchdevice.patching import Patcher
from torchdevice.simulated import alloc_conf, backend
from torchdevice.simulated import device as simulated_device
from torchdevice.simulated.device import OWN
from torchdevice.simulated.profile import active


def activate(patcher: Patcher) -> None:
    """The C functions torch's memory history calls answer for the simulated GPUs until ``patcher.restore()``; the
    recording stops there."""
    patcher.set(torch._C, "_cuda_record_memory_history", _record)
    patcher.set(torch._C, "_cuda_record_memory_history_legacy", _record_legacy)
    patcher.set(torch._C, "_cuda_memorySnapshot", _snapshot)
    patcher.defer(lambda: OWN.record_history(None, None, "python", 1, True, []))
    patcher.set(torch._C, "_cuda_attach_out_of_memory_observer", _attach)
    patcher.defer(_detach)
    if alloc_conf.CHECK is not None:
        patcher.set(torch._C, "_accelerator_setAllocatorSettings", _set_settings)
    patcher.set(torch._C, "_cuda_cudaCachingAllocator_set_allocator_settings", _set_settings)
    patcher.defer(alloc_conf.forget)


def _set_settings(conf: str) -> None:
    """``_set_allocator_settings(conf)``: the allocator decides by every string given so far
    (:func:`.alloc_conf.give`)."""
    settings = alloc_conf.give(conf)
    if settings.error:  # what torch's parser took but CUDA's refuses (an unknown key)
        raise RuntimeError(settings.error)
    simulated_device.use_settings(settings, active().devices)


def _record(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
            max_entries: int = sys.maxsize, clear_history: bool = False, *rest: Any) -> None:
    """``_cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history, ...)``; the releases that
    take ``skip_actions`` pass it after two flags (and 2.15 one more flag after it)."""
    skip = next((list(value) for value in rest if isinstance(value, (list, tuple))), [])
    OWN.record_history(enabled, context, stacks, max_entries, clear_history, skip)


def _record_legacy(enabled: bool, record_context: bool = True, trace_alloc_max_entries: int = 1,
                   trace_alloc_record_context: bool = False, record_context_cpp: bool = False,
                   clear_history: bool = False, *rest: Any) -> None:
    """``_record_memory_history(True, ...)``'s older form: contexts for the state, or for each allocation too."""
    context = "alloc" if trace_alloc_record_context else "state" if record_context else None
    OWN.record_history("all" if enabled else None, context, "all" if record_context_cpp else "python",
                       trace_alloc_max_entries, clear_history, [])


def _snapshot(pool: Any = None) -> dict[str, Any]:
    """``_cuda_memorySnapshot(pool)``: every simulated GPU's; ``pool`` a ``(0, 0, include_traces)`` (the default
    pools; None: with the traces)."""
    traces = not (isinstance(pool, tuple) and len(pool) == 3 and not pool[2])
    parts = [OWN.allocator_snapshot(index) for index in range(active().devices)]
    return cuda_memory.snapshot(parts, alloc_conf.reported(alloc_conf.current()), traces)


_OBSERVER = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
_observers: list[Any] = []
"""The callbacks the backend holds (kept alive while it may call them)."""


def _attach(observer: Callable[[int, int, int, int], Any]) -> None:
    """``_cuda_attach_out_of_memory_observer(observer)``: ``observer(device, alloc, device_allocated, device_free)``
    is called before CUDA's out-of-memory error is raised (an exception it raises is printed, not raised)."""
    callback = _OBSERVER(observer)
    _observers.append(callback)
    _library().torchdevice_sim_attach_oom_observer(callback)


def _detach() -> None:
    _library().torchdevice_sim_detach_oom_observers()
    _observers.clear()


@functools.cache
def _library() -> ctypes.CDLL:
    """The compiled backend's C functions."""
    return ctypes.CDLL(str(backend.library()))
