"""Will it fit: the simulated GPUs' peaks (what their caching allocator reserved at most) on each card of the table.

Each process says, per simulated GPU, whether its peaks fit each card (:func:`torchdevice.device.gpus.verdict`: the
card holds the peak reserved; or only the peak allocated, so that the allocator would give back its cache and retry,
with another fragmentation than this run's; or neither). The program fits a card where each of its GPUs does (each
process's GPU is one card). Memory that is not PyTorch's (the CUDA context, cuBLAS's workspaces) is not counted: it
is said with the verdicts. The simulated devices give the processes' rows (:data:`SOURCES`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NOT_COUNTED = "the CUDA context and cuBLAS's workspaces are not counted"
ORDER = ("fits", "may fit", "does not fit")
GIB = 1 << 30
SOURCES: list[Callable[[], list[dict[str, Any]]]] = []
"""What gives this process's simulated GPUs' rows (registered by the simulated devices when they are activated)."""


def rows() -> list[dict[str, Any]]:
    """This process's simulated GPUs' rows (none where none were activated)."""
    return [row for source in SOURCES for row in source()]


def verdicts(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per card of the table: its memory, the largest peaks of the program's GPUs, the worst verdict of them and
    the smallest margin; none where no process had a simulated GPU."""
    devices = _devices(processes)
    if not devices:
        return []
    reserved = max(d["peak_reserved"] for d in devices)
    allocated = max(d["peak_allocated"] for d in devices)
    found = []
    for card, first in devices[0]["cards"].items():
        worst = max((d["cards"][card]["verdict"] for d in devices), key=ORDER.index)
        found.append({"card": card, "memory": first["memory"], "peak_reserved": reserved,
                      "peak_allocated": allocated, "margin": first["memory"] - reserved, "verdict": worst})
    return found


def summary(document: dict[str, Any]) -> list[str]:
    """The report's lines on memory: the run's peaks on its card, and the cards it fits."""
    devices = _devices(document["processes"])
    rows = document.get("fit") or []
    if not devices or not rows:
        return []
    own = max(devices, key=lambda d: d["peak_reserved"])
    margin = own["total"] - own["peak_reserved"]
    ooms = sum(d["num_ooms"] for d in devices)
    lines = [f"  memory: peak {own['peak_reserved'] / GIB:.2f} GiB reserved ({own['peak_allocated'] / GIB:.2f} GiB "
             f"allocated) of the {own['card']}'s {own['total'] / GIB:.2f} GiB, "
             f"{margin / GIB:.2f} GiB spare" + (f"; {ooms} out-of-memory error(s) caught" if ooms else "")]
    for verdict in ORDER:
        cards = [r["card"] for r in rows if r["verdict"] == verdict]
        if cards:
            lines.append(f"    {verdict}: {', '.join(cards)}")
    lines.append(f"    ({NOT_COUNTED})")
    return lines


def _devices(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The simulated GPUs of the report's processes, process by process."""
    return [d for p in processes for d in p.get("gpu_memory", [])]
