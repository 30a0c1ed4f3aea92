"""Which host tensors stand for CUDA tensors: a mark on their storage.

On a target whose tensors are CPU tensors, a tensor "on cuda:1" and a host tensor are both CPU tensors.
What tells them apart is a mark the runtime sets on the storage (the ``UntypedStorage`` object, which
torch keeps for as long as the storage lives and shares between a tensor, its views, ``detach()`` and
``param.data``): the emulated device index, or :data:`PINNED` for page-locked host memory.

Storages are marked where CUDA memory is born: a factory or ``new_*`` with a CUDA device, a move to
CUDA (``Tensor.to/cuda``, ``Module.to/cuda``), ``torch.load`` of CUDA storages, ``pin_memory()``.
Results of operations are not marked: following every op would cost a Python call per op. So a
result computed from device tensors is not known as one (``is_cuda`` says False, ``.to("cuda")``
copies it, ``.cpu()`` copies it as it would on a GPU); see :mod:`torchdevice.runtime.tensors`.

The :class:`Ledger` counts the bytes of live marked storages per device, for
``torch.cuda.memory_allocated()`` and its peak (updated under the GIL, without a lock: a count read
while another thread allocates may miss that allocation, as a GPU's statistics may).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from torchdevice.device.aten import cpp_device

if TYPE_CHECKING:
    from torchdevice.device.target import Target

MARK = "_torchdevice_device"
"""The storage attribute holding the mark."""
PINNED = -1
"""The mark of host memory pinned by ``pin_memory()``."""


def mark_of(t: torch.Tensor) -> int | None:
    """The emulated device index ``t`` lives on, :data:`PINNED`, or None for ordinary host memory."""
    try:
        return getattr(t.untyped_storage(), MARK, None)
    except (RuntimeError, NotImplementedError, TypeError):
        return None


def device_index(t: torch.Tensor) -> int | None:
    """The emulated device index of a device tensor; None for host tensors, pinned or not."""
    index = mark_of(t)
    return index if index is not None and index >= 0 else None


class Ledger:
    """Live bytes of marked storages per emulated device, and their peaks."""

    def __init__(self, devices: int) -> None:
        self.allocated = [0] * devices
        self.peak = [0] * devices
        self._live: dict[weakref.ref[Any], tuple[int, int]] = {}
        self._released = self._release  # one bound method for every weak reference

    def mark(self, t: Any, index: int) -> Any:
        """Mark the storage of tensor (or storage) ``t`` as on device ``index``; return ``t``. A storage
        already marked keeps its mark (it was born elsewhere and handed back unchanged). On the path of every
        factory asked for CUDA: written for speed."""
        try:
            storage = t.untyped_storage()
        except AttributeError:  # a storage itself
            storage = t
        except (RuntimeError, NotImplementedError, TypeError):  # none: sparse, nested, meta, wrapper tensors
            return t
        attributes = storage.__dict__
        if MARK not in attributes:
            attributes[MARK] = index
            if index >= 0:
                nbytes = storage.nbytes()
                self._live[weakref.ref(storage, self._released)] = (index, nbytes)
                allocated = self.allocated[index] = self.allocated[index] + nbytes
                if allocated > self.peak[index]:
                    self.peak[index] = allocated
        return t

    def reset_peak(self, index: int) -> None:
        self.peak[index] = self.allocated[index]

    def _release(self, ref: weakref.ref[Any]) -> None:
        index, nbytes = self._live.pop(ref, (0, 0))
        self.allocated[index] -= nbytes


def on_device(target: Target) -> Callable[[torch.Tensor], bool]:
    """Whether a tensor is one of ``target``'s devices' (what the program calls a CUDA tensor): on the CPU target a
    marked tensor, elsewhere one :func:`of_target`."""
    if target.device.type == "cpu":
        return lambda t: device_index(t) is not None
    return of_target(target)


def of_target(target: Target) -> Callable[[torch.Tensor], bool]:
    """Whether a tensor is of ``target``'s device in C++, or one it shows (hosted tensors): on the CPU target every
    host tensor."""
    types = {target.device.type, (target.shown or target.device).type}
    return lambda t: cpp_device(t).type in types
