"""Targets: the device whose kernels the engine completes, and what is known about them.

A :class:`Target` names the device results belong to, the dispatch key its kernels are registered
under, the name its error messages use, and what the kernel table knows: the aten overloads it has
no kernel for (never tried there) and those to try first and watch. MPS's table is generated from
the catalog (``generated/fallback_table.py``); the CPU has every kernel.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch

from torchdevice.runtime.hosted import WIDE, hold

NO_DTYPES: frozenset[torch.dtype] = frozenset()


@dataclass(frozen=True)
class Target:
    name: str
    """Name of its verdicts in the capability cache (``"mps"``)."""
    device: torch.device
    dispatch_key: str
    """Where fallback kernels are registered (``"MPS"``)."""
    backend: str
    """How PyTorch's error messages name the device (``"MPS"``)."""
    missing: frozenset[str] = frozenset()
    """Aten overloads (``"aten::cumsum.out"``) without a kernel here: routed without trying."""
    try_first: frozenset[str] = frozenset()
    """Aten overloads tried here first, routed elsewhere on a device-compatibility error."""
    cannot_hold: frozenset[torch.dtype] = field(default=NO_DTYPES)
    """Dtypes no tensor of this device can have: such results are hosted (:mod:`torchdevice.runtime.hosted`)."""

    @property
    def native_is_cpu(self) -> bool:
        """The target's own kernels are the CPU's (the CPU route calls them directly)."""
        return self.dispatch_key == "CPU"

    def escape(self) -> contextlib.AbstractContextManager[object]:
        """A context in which ops on this device's tensors run as plain CPU ops; for a real device,
        whose tensors are not CPU tensors, nothing needs to change."""
        return contextlib.nullcontext()

    def place(self, x: Any) -> Any:
        """Tensor ``x`` on this device: moved there, or hosted if its dtype cannot live here."""
        if not isinstance(x, torch.Tensor):
            return x
        if x.dtype in self.cannot_hold:
            return hold(x)
        return x if x.device == self.device else x.to(self.device)


def for_device(device: torch.device) -> Target | None:
    """The target for ``device``; None where there is nothing to complete (CUDA passes through)."""
    if device.type == "mps":
        from torchdevice_generated import fallback_table

        return Target("mps", device, "MPS", "MPS", fallback_table.MISSING_ON_MPS, fallback_table.TRY_ON_MPS,
                      WIDE)
    if device.type == "cpu":
        return Target("cpu", device, "CPU", "CPU")
    return None
