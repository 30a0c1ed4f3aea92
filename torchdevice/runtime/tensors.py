"""CUDA-specific tensor and storage methods: ``.cuda()``, ``.is_cuda``, ``.pin_memory()``, the default device.

These are not device *arguments* to translate but CUDA-only methods, so they are written by hand:
``.cuda()`` moves to the target (``.cuda(k)`` too, for each emulated device k), ``.is_cuda`` answers
as on a CUDA machine for tensors on the target (torch's own code still gets the real answer), and
``.pin_memory()`` returns the tensor itself on a target without pinned memory (there, every host
tensor is as good as pinned).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.utils._device

from torchdevice.runtime.patching import Patcher
from torchdevice.runtime.redirect import Redirect
from torchdevice.runtime.views import torch_internal


def patch(patcher: Patcher, r: Redirect) -> None:
    target = r.target
    to = torch._C.TensorBase.to
    cuda_slot = r.slot("torch.Tensor.cuda")
    hits, first, devices = r.hits, r.first, r.devices

    @functools.wraps(torch.Tensor.cuda)
    def cuda(self: torch.Tensor, device: Any = None, non_blocking: bool = False,
             memory_format: torch.memory_format = torch.preserve_format) -> torch.Tensor:
        if device is not None:
            devices[device]  # an index of no emulated device raises CUDA's error
        if hits[cuda_slot]:
            hits[cuda_slot] += 1
        else:
            first(cuda_slot)
        return to(self, target, non_blocking=non_blocking, memory_format=memory_format)

    real_is_cuda = vars(torch._C.TensorBase)["is_cuda"].__get__

    def is_cuda(self: torch.Tensor) -> bool:
        if torch_internal():
            return real_is_cuda(self)
        return self.device.type in ("cuda", target.type)

    patcher.set(torch.Tensor, "cuda", cuda)
    patcher.set(torch.Tensor, "is_cuda", property(is_cuda, doc=torch._C.TensorBase.is_cuda.__doc__))
    for cls in (torch.Tensor, torch.UntypedStorage):  # typed storages pin and move through these
        patcher.set(cls, "pin_memory", _unpinned(cls, r))
    patcher.set(torch.UntypedStorage, "cuda", _storage_cuda(torch.UntypedStorage.cuda, r))
    patcher.set(torch.Tensor, "type", _legacy_type(torch.Tensor.type, r))
    _patch_default_device(patcher, r)


def _unpinned(cls: Any, r: Redirect) -> Any:
    """``pin_memory`` on a target without pinned memory: the object itself, no copy."""
    original = cls.pin_memory
    slot = r.slot(f"torch.{cls.__name__}.pin_memory")

    @functools.wraps(original)
    def pin_memory(self: Any, device: Any = None) -> Any:
        r.count(slot)
        return self

    return pin_memory


def _storage_cuda(original: Any, r: Redirect) -> Any:
    """``Storage.cuda()``: the storage moved to the target (used by ``map_location`` callables)."""
    slot = r.slot("torch.UntypedStorage.cuda")

    @functools.wraps(original)
    def cuda(self: Any, device: Any = None, non_blocking: bool = False) -> Any:
        if device is not None:
            r.devices[device]  # an index of no emulated device raises CUDA's error
        r.count(slot)
        return self.to(device=r.target, non_blocking=non_blocking)

    return cuda


def _legacy_type(original: Any, r: Redirect) -> Any:
    """``Tensor.type("torch.cuda.HalfTensor")`` and ``Tensor.type(torch.cuda.HalfTensor)`` (the emulated
    class): the tensor converted and moved to the target; every other call is the original's."""
    slot = r.slot("torch.Tensor.type")

    @functools.wraps(original)
    def legacy_type(self: torch.Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
        if isinstance(dtype, str) and dtype.startswith("torch.cuda."):
            legacy = getattr(torch, dtype.removeprefix("torch.cuda."), None)
            converted = getattr(legacy, "dtype", None)
        else:
            converted = getattr(dtype, "dtype", None) if getattr(dtype, "is_cuda", False) is True else None
        if converted is None:
            return original(self, dtype, non_blocking, **kwargs)
        r.count(slot)
        return self.to(r.target, converted, non_blocking=non_blocking)

    return legacy_type


def _patch_default_device(patcher: Patcher, r: Redirect) -> None:
    """``torch.set_default_device("cuda")`` and ``with torch.device("cuda"):`` both build a DeviceContext."""
    context = torch.utils._device.DeviceContext
    init = context.__init__
    slot = r.slot("torch.set_default_device")

    @functools.wraps(init)
    def __init__(self: Any, device: Any) -> None:
        init(self, r.device(slot, device))

    patcher.set(context, "__init__", __init__)
