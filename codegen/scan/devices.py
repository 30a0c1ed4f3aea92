"""Which parameters carry a device: found by name or by annotation, in any overload."""

from __future__ import annotations

import re

from codegen.signatures import Signature

# Names that carry a device whatever their annotation (autocast and GradScaler's device_type,
# DDP's device_ids/output_device, torch.load's map_location, DataLoader's pin_memory_device...).
DEVICE_PARAM_NAMES = frozenset(
    """
    device devices device_id device_ids device_type map_location output_device pin_memory_device
    """.split()
)
# Annotations that denote a device: torch.device, the stubs' DeviceLikeType/_device, schemas' Device.
_DEVICE_ANNOTATION = re.compile(r"\b(?:device|Device|DeviceLikeType|_device|_device_t)\b")


def device_params(signatures: list[Signature]) -> list[str]:
    """Sorted names of the device-carrying parameters of any of ``signatures``."""
    return sorted(
        {
            p.name
            for signature in signatures
            for p in signature.params
            if p.name in DEVICE_PARAM_NAMES or _DEVICE_ANNOTATION.search(p.annotation or "")
        }
    )
