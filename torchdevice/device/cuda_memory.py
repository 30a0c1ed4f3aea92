"""A simulated GPU's memory as torch's Python reads CUDA's: the statistics of ``torch._C._cuda_memoryStats`` and
the snapshot of ``torch._C._cuda_memorySnapshot`` (segments, their blocks, the trace of the allocator's actions and
where each was made), from the rows its caching allocator gives (``simulated/caching_allocator.h``:
``Device::stats``, ``Device::snapshot``, ``Device::trace_rows``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torchdevice_generated

ARRAYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes", "active_bytes",
          "inactive_split_bytes", "requested_bytes")
"""The stats kept for all blocks and per pool, in the row's order."""
POOLS = ("all", "small_pool", "large_pool")
FIELDS = ("current", "peak", "allocated", "freed")
SINGLE = ("oversize_allocations", "oversize_segments")
COUNTS = ("num_alloc_retries", "num_ooms", "num_sync_all_streams", "num_device_alloc", "num_device_free",
          "max_split_size")
NESTED_ORDER = ("num_alloc_retries", "num_ooms", "max_split_size", "num_sync_all_streams", "num_device_alloc",
                "num_device_free", *ARRAYS, *SINGLE)
"""The keys of CUDA's nested statistics, in the order ``torch/csrc/cuda/Module.cpp`` makes them."""


def nested(row: list[int]) -> dict[str, Any]:
    """``torch.cuda.memory_stats_as_nested_dict()`` of a simulated GPU's statistics row."""
    values = iter(row)
    found: dict[str, Any] = {}
    for name in ARRAYS:
        found[name] = {pool: {field: next(values) for field in FIELDS} for pool in POOLS}
    for name in SINGLE:
        found[name] = {field: next(values) for field in FIELDS}
    found.update(zip(COUNTS, values, strict=True))
    return {key: found[key] for key in NESTED_ORDER}


def flat(row: list[int]) -> dict[str, int]:
    """``torch.cuda.memory_stats()``: the nested statistics' keys joined by ``.``, sorted."""
    result: list[tuple[str, int]] = []

    def add(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                add(f"{prefix}.{key}" if prefix else key, inner)
        else:
            result.append((prefix, value))

    add("", nested(row))
    return dict(sorted(result))


ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "oom")
"""The trace's actions, by their number in the rows (``caching_allocator.h``: ``Action``)."""
_RUNTIME = tuple(os.path.dirname(path) + os.sep for path in (os.path.dirname(__file__), torchdevice_generated.__file__))
"""Where the runtime's frames are: torchdevice's and its generated package's files."""
Part = tuple[Sequence[int], Sequence[int], Sequence[int], Sequence[str]]
"""One device's snapshot as the backend gives it: segment rows, trace rows, tracebacks, frames."""


def snapshot(parts: Sequence[Part], settings: dict[str, Any], traces: bool = True) -> dict[str, Any]:
    """``torch._C._cuda_memorySnapshot()`` of the devices whose ``parts`` are given, in order: every device's
    segments, each device's trace (empty with ``traces`` False), the allocator's ``settings``."""
    found: dict[str, Any] = {"segments": [], "device_traces": [], "external_annotations": []}
    for device, (segment_rows, trace_rows, tracebacks, frames) in enumerate(parts):
        contexts = _contexts(tracebacks, frames)
        found["segments"] += _segments(segment_rows, device, contexts)
        found["device_traces"].append(_trace(trace_rows, contexts) if traces else [])
    found["allocator_settings"] = settings
    return found


def _contexts(tracebacks: Sequence[int], frames: Sequence[str]) -> list[list[dict[str, Any]]]:
    """Each context's frames, innermost first, as torch symbolizes them (one dict per distinct frame), without the
    runtime's own (its wrappers of torch's functions are no frames of a GPU's)."""
    distinct = [{"name": frames[i + 1], "filename": frames[i], "line": int(frames[i + 2])}
                for i in range(0, len(frames), 3)]
    found, values = [], iter(tracebacks)
    for count in values:
        found.append([frame for frame in (distinct[next(values)] for _ in range(count))
                      if not str(frame["filename"]).startswith(_RUNTIME)])
    return found


def _frames(contexts: list[list[dict[str, Any]]], index: int) -> list[dict[str, Any]]:
    return contexts[index] if index >= 0 else []


def _segments(row: Sequence[int], device: int, contexts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each segment, its blocks in address order, as CUDA's snapshot has them (stream 0, the default pools)."""
    found: list[dict[str, Any]] = []
    values = iter(row)
    for address in values:
        total, small, count, context = next(values), next(values), next(values), next(values)
        blocks: list[dict[str, Any]] = []
        for _ in range(count):
            start, size, requested, allocated, where = (next(values) for _ in range(5))
            blocks.append({"address": start, "size": size, "requested_size": requested,
                           "state": "active_allocated" if allocated else "inactive",
                           "frames": _frames(contexts, where)})
        active = [b for b in blocks if b["state"] == "active_allocated"]
        allocated = sum(b["size"] for b in active)
        # active: allocated, or freed while a stream's use is pending (CUDA's "active_pending_free"): none here
        found.append({"device": device, "address": address, "total_size": total,
                      "allocated_size": allocated, "active_size": allocated,
                      "requested_size": sum(b["requested_size"] for b in active), "stream": 0,
                      "segment_type": "small" if small else "large", "segment_pool_id": (0, 0),
                      "is_expandable": False, "frames": _frames(contexts, context), "blocks": blocks})
    return found


def _trace(row: Sequence[int], contexts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The allocator's actions, oldest first; an entry gathered where it was has its frames."""
    found: list[dict[str, Any]] = []
    values = iter(row)
    for action in values:
        addr, size, time_us, context = next(values), next(values), next(values), next(values)
        entry: dict[str, Any] = {"action": ACTIONS[action], "device_free" if ACTIONS[action] == "oom" else "addr": addr,
                                 "size": size, "stream": 0, "time_us": time_us}
        if context >= 0:
            entry["frames"] = contexts[context]
        found.append(entry)
    return found
