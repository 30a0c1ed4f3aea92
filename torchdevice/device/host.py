"""The host machine: its memory, which the CPU target and the simulated devices answer memory questions with."""

from __future__ import annotations

import os


def system_memory() -> tuple[int, int]:
    """``(available, total)`` bytes of the host's memory."""
    page = os.sysconf("SC_PAGE_SIZE")
    return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
