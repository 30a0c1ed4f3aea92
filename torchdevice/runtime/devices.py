"""What ``"cuda"`` means once the runtime is active: the target device and the translation caches.

Every place a device enters PyTorch looks its argument up in a :class:`DeviceMap` (device values:
``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", 1)``, a bare index) or a :class:`TypeMap` (device
*type* strings such as autocast's ``device_type``). A lookup is one dictionary access; the first
sight of each distinct value computes and caches its translation. Values that need no translation
map to themselves (the identical object), so ``translated is not original`` tells a redirect.
"""

from __future__ import annotations

import os

import torch

TARGETS = ("cpu", "mps", "cuda")

_CACHEABLE = (str, int, torch.device, torch.dtype, type(None))
"""Key types worth caching: a small, finite set of values in any program (tensors are not)."""


def resolve_target(requested: str | torch.device | None = None) -> torch.device:
    """The device ``"cuda"`` should mean: ``requested``, else ``$TORCHDEVICE_TARGET``, else the best present.

    Real CUDA is preferred where present (the runtime then passes everything through), then MPS,
    then CPU. Asking for a target this machine lacks is an error.
    """
    name = requested if requested is not None else os.environ.get("TORCHDEVICE_TARGET") or None
    if name is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps") if torch.backends.mps.is_available() else torch.device("cpu")
    kind = name.type if isinstance(name, torch.device) else str(name).partition(":")[0]
    if kind not in TARGETS:
        raise ValueError(f"torchdevice: unknown target {name!r}; expected one of {', '.join(TARGETS)}")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError("torchdevice: target 'mps' requested but MPS is not available on this machine")
    if kind == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("torchdevice: target 'cuda' requested but CUDA is not available on this machine")
    return torch.device(kind)


def is_cuda_value(value: object) -> bool:
    """Whether ``value`` names a CUDA device: ``"cuda"``, ``"cuda:N"``, ``torch.device("cuda", N)`` or an index."""
    if isinstance(value, torch.device):
        return value.type == "cuda"
    if isinstance(value, str):
        return value.split(":", 1)[0].strip() == "cuda"
    return isinstance(value, int) and not isinstance(value, bool)


class DeviceMap(dict):
    """``value -> translated device``, computed on first sight of each distinct value.

    CUDA values become the target device; everything else (other devices, dtypes, ``None``,
    tensors passed to ``Tensor.to``) maps to itself.
    """

    def __init__(self, target: torch.device) -> None:
        super().__init__()
        self.target = target

    def __missing__(self, key: object) -> object:
        value = self.translate(key)
        if type(key) in _CACHEABLE:
            self[key] = value
        return value

    def translate(self, key: object) -> object:
        if not is_cuda_value(key):
            return key
        if isinstance(key, str):
            torch.device(key)  # a malformed string gets torch's own error
        return self.target


class StrictDeviceMap(DeviceMap):
    """Like :class:`DeviceMap`, for argument slots where a bare integer is a size in some overload."""

    def translate(self, key: object) -> object:
        return key if isinstance(key, int) else super().translate(key)


class TypeMap(DeviceMap):
    """``device_type -> translated device type``: ``"cuda"`` becomes the target's type string."""

    def translate(self, key: object) -> object:
        return self.target.type if isinstance(key, str) and key == "cuda" else key


def translate_location(location: str, target: torch.device) -> str:
    """A storage location recorded in a checkpoint (``"cuda:0"``) as it should be restored."""
    return str(target) if is_cuda_value(location) else location
