"""Data in: checkpoints saved on CUDA.

* ``torch.load``: every ``map_location`` form (``None``, string, device, dict, callable returning
  ``None``) ends in ``torch.serialization.default_restore_location(storage, location)``; patching
  that one function to translate CUDA locations covers them all (the storages it restores there are
  marked as on their device), and ``torch.load`` itself is not wrapped. Callables that call
  ``storage.cuda()`` are covered by the storage patch in :mod:`torchdevice.runtime.tensors`.

``DataLoader(pin_memory=True)`` needs nothing here: it pins through ``Tensor.pin_memory`` (a copy, marked as
pinned: :mod:`torchdevice.runtime.tensors`), as it would on a GPU machine.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.serialization
import torch.utils.data

from torchdevice.runtime.devices import translate_location
from torchdevice.runtime.patching import Patcher
from torchdevice.runtime.redirect import Redirect


def patch(patcher: Patcher, r: Redirect) -> None:
    restore = torch.serialization.default_restore_location
    load_slot = r.slot("torch.load")

    @functools.wraps(restore)
    def default_restore_location(storage: Any, location: str) -> Any:
        translated = translate_location(location, r.target)
        if translated == location:
            return restore(storage, location)
        index = r.index(location)
        if index >= r.emulated:
            raise RuntimeError(f"Attempting to deserialize object on CUDA device {index} but torch.cuda.device_count() "
                               f"is {r.emulated}. Please use torch.load with map_location to map your storages to an "
                               "existing device.")
        r.count(load_slot)
        restored = restore(storage, translated)
        return r.ledger.mark(restored, index) if isinstance(restored, torch.UntypedStorage) else restored

    patcher.set(torch.serialization, "default_restore_location", default_restore_location)
