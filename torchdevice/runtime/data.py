"""Data in and out: checkpoints saved on CUDA, and DataLoader's pinned memory.

* ``torch.load``: every ``map_location`` form (``None``, string, device, dict, callable returning
  ``None``) ends in ``torch.serialization.default_restore_location(storage, location)``; patching
  that one function to translate CUDA locations covers them all (the storages it restores there are
  marked as on their device), and ``torch.load`` itself is not wrapped. Callables that call
  ``storage.cuda()`` are covered by the storage patch in :mod:`torchdevice.runtime.tensors`.
* ``DataLoader(pin_memory=True)`` on a target without pinned memory loads into ordinary memory,
  silently, as if pinning had been asked of a machine where all host memory is pinned.
"""

from __future__ import annotations

import functools
import inspect
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
    _patch_dataloader(patcher, r)


def _patch_dataloader(patcher: Patcher, r: Redirect) -> None:
    loader = torch.utils.data.DataLoader
    init = loader.__init__
    signature = inspect.signature(init)
    slot = r.slot("torch.utils.data.DataLoader")

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        if bound.arguments.get("pin_memory"):
            r.count(slot)
            bound.arguments["pin_memory"] = False
            bound.arguments.pop("pin_memory_device", None)
        init(*bound.args, **bound.kwargs)

    patcher.set(loader, "__init__", __init__)
