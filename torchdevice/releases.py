"""The torch releases torchdevice runs on, and where the facts it uses on the installed one come from.

The catalog (and so every generated wrapper and table) is scanned from one release, :data:`CATALOG`; the runtime
runs on every release in :data:`TESTED` (``make test-torch TORCH=2.x`` runs the tier that shows it), judging each
torch internal it calls by whether the installed torch has it, not by the release's number.
"""

from __future__ import annotations

import torch
from torchdevice_generated import TORCH_VERSION as CATALOG

TESTED = ((2, 10), (2, 11), (2, 12), (2, 13), (2, 14), (2, 15))
"""The releases (major, minor) the release tier ran on (the README's table)."""


def release(version: str | None = None) -> tuple[int, int]:
    """``"2.13.0+cpu"`` (default: the installed torch's) -> ``(2, 13)``."""
    major, minor = (version or torch.__version__).split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _name(numbers: tuple[int, int]) -> str:
    return ".".join(map(str, numbers))


def facts() -> str:
    """One line: the installed release, and where the facts the runtime uses on it come from."""
    here = release()
    base = f"torch {torch.__version__}: the catalog's facts (entry points, kernel tables, messages) are {CATALOG}'s"
    if release(CATALOG) == here:
        return base
    if here > TESTED[-1]:
        return (f"{base}; this release is newer than the newest tested ({_name(TESTED[-1])}): its new device entry "
                "points are left untranslated")
    if here < TESTED[0]:
        return f"{base}; this release is older than the oldest supported ({_name(TESTED[0])})"
    return f"{base}; this release ran the release tier with them (make test-torch TORCH={_name(here)}.x)"


def supported() -> bool:
    """Whether the installed release is one torchdevice supports (2.10 or newer)."""
    return release() >= TESTED[0]
