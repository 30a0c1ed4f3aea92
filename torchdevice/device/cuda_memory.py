"""A simulated GPU's memory as torch's Python reads CUDA's: the statistics of ``torch._C._cuda_memoryStats`` and
the segments of ``torch._C._cuda_memorySnapshot``, made from the rows its caching allocator gives
(``simulated/caching_allocator.h``: ``Device::stats`` and ``Device::snapshot``)."""

from __future__ import annotations

from typing import Any

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


def segments(row: list[int], device: int) -> list[dict[str, Any]]:
    """``torch.cuda.memory_snapshot()``: each segment, its blocks in address order, as CUDA's snapshot has them
    (stream 0, the default pools, no stack frames: none are recorded)."""
    found: list[dict[str, Any]] = []
    values = iter(row)
    for address in values:
        total, small, count = next(values), next(values), next(values)
        blocks: list[dict[str, Any]] = []
        for _ in range(count):
            start, size, requested, allocated = next(values), next(values), next(values), next(values)
            blocks.append({"address": start, "size": size, "requested_size": requested,
                           "state": "active_allocated" if allocated else "inactive", "frames": []})
        active = [b for b in blocks if b["state"] == "active_allocated"]
        found.append({"device": device, "address": address, "total_size": total,
                      "allocated_size": sum(b["size"] for b in active), "active_size": sum(b["size"] for b in active),
                      "requested_size": sum(b["requested_size"] for b in active), "stream": 0,
                      "segment_type": "small" if small else "large", "segment_pool_id": (0, 0),
                      "is_expandable": False, "frames": [], "blocks": blocks})
    return found
