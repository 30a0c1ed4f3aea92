"""Data in: checkpoints saved on CUDA.

* ``torch.load``: every ``map_location`` form (``None``, string, device, dict, callable returning
  ``None``) ends in ``torch.serialization.default_restore_location(storage, location)``; patching
  that one function to translate CUDA locations covers them all (the storages it restores there are
  marked as on their device), and ``torch.load`` itself is not wrapped. Callables that call
  ``storage.cuda()`` are covered by the storage patch in :mod:`torchdevice.runtime.tensors`. Where the
  target refuses a tensor's dtype (float64 on MPS), the tensor is rebuilt on the host and hosted
  (:mod:`torchdevice.device.hosted`).

``DataLoader(pin_memory=True)`` needs nothing here: it pins through ``Tensor.pin_memory`` (a copy, marked as
pinned: :mod:`torchdevice.runtime.tensors`), as it would on a GPU machine.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch._weights_only_unpickler
import torch.serialization
import torch.utils.data

from torchdevice.device.aten import cpp_storage_device
from torchdevice.device.hosted import Hosting
from torchdevice.device.residence import MARK
from torchdevice.patching import Patcher
from torchdevice.runtime.device_maps import translate_location
from torchdevice.runtime.emulation import Emulation
from torchdevice.runtime.installation import Installation


def patch(patcher: Patcher, r: Installation, emulation: Emulation) -> None:
    restore = torch.serialization.default_restore_location
    load_slot = r.counts.slot("torch.load")

    @functools.wraps(restore)
    def default_restore_location(storage: Any, location: str) -> Any:
        translated = translate_location(location, r.device, r.target.aliases)
        if translated == location:
            return restore(storage, location)
        index = r.index(location)
        translated = str(r.device_of(index)) if r.target.indexed else translated
        if index >= r.emulated:
            raise RuntimeError(f"Attempting to deserialize object on CUDA device {index} but torch.cuda.device_count() "
                               f"is {r.emulated}. Please use torch.load with map_location to map your storages to an "
                               "existing device.")
        r.counts.count(load_slot)
        restored = restore(storage, translated)
        return r.ledger.mark(restored, index) if isinstance(restored, torch.UntypedStorage) else restored

    patcher.set(torch.serialization, "default_restore_location", default_restore_location)
    if r.hosting is not None:
        patcher.set(torch._utils, "_rebuild_tensor_v2", _hosted_rebuild(torch._utils._rebuild_tensor_v2, r, r.hosting))
        # the weights-only unpickler (torch.load's default) keeps the rebuild functions it first saw
        allowed = torch._weights_only_unpickler._get_allowed_globals
        allowed.cache_clear()
        patcher.defer(allowed.cache_clear)


def _hosted_rebuild(rebuild: Any, r: Installation, hosting: Hosting) -> Any:
    """``torch._utils._rebuild_tensor_v2`` (every tensor of a checkpoint): a tensor of a storage restored on
    the target in a dtype the target has no tensors of is rebuilt from a host copy of the storage, and hosted."""
    @functools.wraps(rebuild)
    def rebuild_tensor(storage: Any, *args: Any, **kwargs: Any) -> Any:
        data = storage._untyped_storage
        if storage.dtype not in hosting.dtypes or cpp_storage_device(data).type != r.device.type:
            return rebuild(storage, *args, **kwargs)
        copy = torch.storage.TypedStorage(wrap_storage=data.cpu(), dtype=storage.dtype, _internal=True)
        held = hosting.hold(rebuild(copy, *args, **kwargs))
        index = getattr(data, MARK, None)
        return held if index is None else r.ledger.mark(held, index)

    return rebuild_tensor
