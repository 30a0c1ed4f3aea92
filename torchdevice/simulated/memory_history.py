"""A simulated GPU's memory history: ``torch.cuda.memory._record_memory_history``, ``_snapshot`` and
``_dump_snapshot``, and the tools that read them (``torch.cuda._memory_viz``, the memory viewer), as on a GPU.

torch's Python reaches CUDA's allocator for them through three functions of its C module, which a build without CUDA
lacks and a CUDA build without a GPU refuses ("Found no NVIDIA driver"). On a simulated GPU they are the backend's:
its caching allocator keeps where each block and segment was allocated and a trace of its actions
(``caching_allocator.h``), as CUDA's does; torch's own Python around them (each release's own arguments) runs as it
is. What differs from a GPU's: frames are Python's only (``stacks="all"`` also gathers C++ frames on a GPU, which
here would be the simulation's), trace entries have no ``compile_context`` or ``user_metadata``, and no ``snapshot``
entries are recorded.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from torchdevice.device import cuda_memory
from torchdevice.patching import Patcher
from torchdevice.simulated import alloc_conf
from torchdevice.simulated.device import OWN
from torchdevice.simulated.profile import active


def activate(patcher: Patcher) -> None:
    """The C functions torch's memory history calls answer for the simulated GPUs until ``patcher.restore()``; the
    recording stops there."""
    patcher.set(torch._C, "_cuda_record_memory_history", _record)
    patcher.set(torch._C, "_cuda_record_memory_history_legacy", _record_legacy)
    patcher.set(torch._C, "_cuda_memorySnapshot", _snapshot)
    patcher.defer(lambda: OWN.record_history(None, None, "python", 1, True, []))


def _record(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
            max_entries: int = sys.maxsize, clear_history: bool = False, *rest: Any) -> None:
    """``_cuda_record_memory_history(enabled, context, stacks, max_entries, clear_history, ...)``; the releases that
    take ``skip_actions`` pass it last."""
    skip = list(rest[-1]) if rest and isinstance(rest[-1], (list, tuple)) else []
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
    return cuda_memory.snapshot(parts, alloc_conf.reported(alloc_conf.settings()), traces)
