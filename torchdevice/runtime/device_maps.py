"""What ``"cuda"`` means once the runtime is active: how many CUDA devices are emulated on the target, and
the translation caches.

Every place a device enters PyTorch looks its argument up in a :class:`DeviceMap` (device values:
``"cuda"``, ``"cuda:1"``, ``torch.device("cuda", 1)``, a bare index) or a :class:`TypeMap` (device
*type* strings such as autocast's ``device_type``). A lookup is one dictionary access; the first
sight of each distinct value computes and caches its translation. Values that need no translation
map to an equal value (the first equal one seen, not always the identical object), so
``translated != original`` tells a redirect.

``cuda:0`` to ``cuda:N-1`` all mean the target, for the N emulated devices (:func:`resolve_devices`), or, on a
target with devices of its own (the simulated GPUs), its device of that index;
an index beyond them raises the error CUDA raises for it
(:func:`torchdevice.device.placement.invalid_ordinal`).
"""

from __future__ import annotations

import os
import warnings

import torch

from torchdevice.device.placement import invalid_ordinal

_CACHEABLE = (str, int, torch.device, torch.dtype, type(None))
"""Key types worth caching: a small, finite set of values in any program (tensors are not)."""


def resolve_devices(requested: int | None = None) -> int:
    """How many CUDA devices to emulate: ``requested``, else ``$TORCHDEVICE_DEVICES``, else 1.

    Under ``torchrun`` (``$LOCAL_WORLD_SIZE`` set) the default is the number of processes per node,
    so that each process's ``cuda:$LOCAL_RANK`` exists, as on a node with a GPU per process. A
    variable that is not a positive whole number is warned about and ignored; a bad ``requested``
    is an error.
    """
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"torchdevice: devices must be a positive whole number, not {requested!r}")
        return requested
    text = os.environ.get("TORCHDEVICE_DEVICES", "").strip()
    if text:
        if text.isdigit() and int(text) >= 1:
            return int(text)
        warnings.warn(f"torchdevice: TORCHDEVICE_DEVICES={text!r} is not a positive whole number; "
                      "emulating 1 CUDA device", stacklevel=4)
        return 1
    local = os.environ.get("LOCAL_WORLD_SIZE", "")
    return int(local) if local.isdigit() and int(local) >= 1 else 1


def is_cuda_value(value: object) -> bool:
    """Whether ``value`` names a CUDA device: ``"cuda"``, ``"cuda:N"``, ``torch.device("cuda", N)`` or an index."""
    if isinstance(value, torch.device):
        return value.type == "cuda"
    if isinstance(value, str):
        return value.split(":", 1)[0].strip() == "cuda"
    return isinstance(value, int) and not isinstance(value, bool)


class DeviceMap(dict):
    """``value -> translated device``, computed on first sight of each distinct value.

    CUDA values become the target device, and so do values of the device types in ``aliases`` (the simulated Mac:
    ``"mps"``, which libraries name); everything else (other devices, dtypes, ``None``, tensors passed to
    ``Tensor.to``) maps to itself. A CUDA index of no emulated device raises.
    """

    def __init__(self, target: torch.device, devices: int = 1, aliases: tuple[str, ...] = (),
                 indexed: bool = False) -> None:
        super().__init__()
        self.target = target
        self.devices = devices
        self.aliases = aliases
        self.indexed = indexed
        """Whether ``cuda:i`` is the target's device ``i`` (and ``cuda`` its current device: the simulated GPUs)."""

    def __missing__(self, key: object) -> object:
        value = self.translate(key)
        if type(key) in _CACHEABLE:
            self[key] = value
        return value

    def translate(self, key: object) -> object:
        if self.aliases and _device_type(key) in self.aliases:
            return self.target
        if not is_cuda_value(key):
            return key
        if isinstance(key, str):
            key = torch.device(key)  # a malformed string gets torch's own error
        index = key.index if isinstance(key, torch.device) else key
        if isinstance(index, int) and index >= self.devices:
            raise invalid_ordinal(index, self.devices)
        if self.indexed:
            return torch.device(self.target.type, index) if isinstance(index, int) else torch.device(self.target.type)
        return self.target


class StrictDeviceMap(DeviceMap):
    """Like :class:`DeviceMap`, for argument slots where a bare integer is a size in some overload."""

    def translate(self, key: object) -> object:
        return key if isinstance(key, int) else super().translate(key)


class TypeMap(DeviceMap):
    """``device_type -> translated device type``: ``"cuda"`` (and an alias) becomes the target's type string."""

    def translate(self, key: object) -> object:
        return self.target.type if isinstance(key, str) and (key == "cuda" or key in self.aliases) else key


def _device_type(value: object) -> str | None:
    """The device type a device value names (``"mps"`` for ``"mps:0"``), if it is one."""
    if isinstance(value, torch.device):
        return value.type
    return value.partition(":")[0].strip() if isinstance(value, str) else None


def translate_location(location: str, target: torch.device, aliases: tuple[str, ...] = ()) -> str:
    """A storage location recorded in a checkpoint (``"cuda:0"``; an alias's) as it should be restored."""
    return str(target) if is_cuda_value(location) or location.partition(":")[0] in aliases else location
