"""Mixed precision: ``torch.autocast``/``torch.amp.autocast`` and ``torch.amp.GradScaler`` on the target.

Both take a device *type* (``"cuda"``); their constructors are patched to translate it, which also
covers the deprecated ``torch.cuda.amp.autocast`` and ``torch.cuda.amp.GradScaler`` (subclasses that
pass ``"cuda"`` up). The class objects stay the same, so ``isinstance`` and TorchScript's special
handling of autocast are untouched.

A region opened for ``"cuda"`` is CUDA's, as on a GPU:

- with no ``dtype`` it takes CUDA's autocast dtype (``torch.get_autocast_dtype("cuda")``: float16
  unless the program set another), not the target's;
- while it is active, CUDA's own autocast state says so (``torch.is_autocast_enabled("cuda")`` is
  True, ``get_autocast_dtype("cuda")`` is the region's dtype), as on a GPU. The ``torch`` functions
  that read and set that state are left untranslated: they answer for CUDA;
- the ops on the target's autocast key follow CUDA's policy while that state is on
  (:mod:`.autocast_policy`); a region opened for ``"cpu"`` alone keeps the CPU's policy.

The policy is registered on the target's autocast key (:attr:`~torchdevice.device.target.Target.autocast_key`:
``AutocastCPU``, ``AutocastMPS``, the simulated Mac's ``AutocastPrivateUse1``).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import torch

from torchdevice.device.residence import of_target
from torchdevice.patching import Patcher
from torchdevice.runtime import autocast_policy
from torchdevice.runtime.emulation import Emulation
from torchdevice.runtime.installation import Installation

_CUDA = "_torchdevice_cuda"
"""Attribute of an autocast instance opened for ``"cuda"``: CUDA's state before it was entered."""


def patch(patcher: Patcher, r: Installation, emulation: Emulation) -> None:
    autocast, scaler = torch.amp.autocast_mode.autocast, torch.amp.grad_scaler.GradScaler
    autocast_init, autocast_enter, autocast_exit = autocast.__init__, autocast.__enter__, autocast.__exit__
    scaler_init = scaler.__init__
    autocast_slot, scaler_slot = r.counts.slot("torch.autocast"), r.counts.slot("torch.amp.GradScaler")

    # a simulated device's own type is named by torch's code only, for the program's device (torch.utils.checkpoint
    # recomputing a CUDA region): a CUDA region too
    own = r.device.type if r.target.dispatch_key == "PrivateUse1" else None

    @functools.wraps(autocast_init)
    def autocast_init_on_target(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
        translated = r.device_type(autocast_slot, device_type)
        if translated is not device_type or device_type == own:  # opened for CUDA: CUDA's default dtype
            if args and args[0] is None:
                args = (torch._C.get_autocast_dtype("cuda"), *args[1:])
            elif not args and kwargs.get("dtype") is None:
                kwargs["dtype"] = torch._C.get_autocast_dtype("cuda")
            setattr(self, _CUDA, None)
        autocast_init(self, translated, *args, **kwargs)

    registered: list[bool] = []
    lock = threading.Lock()

    def register_policy() -> None:
        """CUDA's policy kernels, registered when the first CUDA region opens (resolving ~120 aten overloads
        costs ~0.1 s: a program that never autocasts does not pay it); undone by ``uninstall()``."""
        with lock:
            if not registered:
                autocast_policy.activate(patcher, of_target(r.target), r.target.autocast_key)
                registered.append(True)

    @functools.wraps(autocast_enter)
    def autocast_enter_as_cuda(self: Any) -> Any:
        if hasattr(self, _CUDA) and not torch._jit_internal.is_scripting():
            if not registered:
                register_policy()
            # CUDA's autocast state, as a region opened for CUDA sets it on a GPU
            setattr(self, _CUDA, (torch._C.is_autocast_enabled("cuda"), torch._C.get_autocast_dtype("cuda")))
            torch._C.set_autocast_enabled("cuda", self._enabled)
            torch._C.set_autocast_dtype("cuda", self.fast_dtype)
        return autocast_enter(self)

    @functools.wraps(autocast_exit)
    def autocast_exit_as_cuda(self: Any, *exc: Any) -> Any:
        try:
            return autocast_exit(self, *exc)
        finally:
            before = getattr(self, _CUDA, None)
            if before is not None:
                torch._C.set_autocast_enabled("cuda", before[0])
                torch._C.set_autocast_dtype("cuda", before[1])
                setattr(self, _CUDA, None)

    @functools.wraps(scaler_init)
    def scaler_init_on_target(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
        scaler_init(self, r.device_type(scaler_slot, device), *args, **kwargs)

    patcher.set(autocast, "__init__", autocast_init_on_target)
    patcher.set(autocast, "__enter__", autocast_enter_as_cuda)
    patcher.set(autocast, "__exit__", autocast_exit_as_cuda)
    patcher.set(scaler, "__init__", scaler_init_on_target)
