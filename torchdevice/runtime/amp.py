"""Mixed precision: ``torch.autocast``/``torch.amp.autocast`` and ``torch.amp.GradScaler`` on the target.

Both take a device *type* (``"cuda"``); their constructors are patched to translate it, which also
covers the deprecated ``torch.cuda.amp.autocast`` and ``torch.cuda.amp.GradScaler`` (subclasses that
pass ``"cuda"`` up). The class objects stay the same, so ``isinstance`` and TorchScript's special
handling of autocast are untouched. With no ``dtype``, autocast uses the target's autocast dtype
(bfloat16 on CPU), as ``torch.autocast("cpu")`` would.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from torchdevice.runtime.patching import Patcher
from torchdevice.runtime.redirect import Redirect


def patch(patcher: Patcher, r: Redirect) -> None:
    autocast, scaler = torch.amp.autocast_mode.autocast, torch.amp.grad_scaler.GradScaler
    autocast_init, scaler_init = autocast.__init__, scaler.__init__
    autocast_slot, scaler_slot = r.slot("torch.autocast"), r.slot("torch.amp.GradScaler")

    @functools.wraps(autocast_init)
    def autocast_init_on_target(self: Any, device_type: str, *args: Any, **kwargs: Any) -> None:
        autocast_init(self, r.device_type(autocast_slot, device_type), *args, **kwargs)

    @functools.wraps(scaler_init)
    def scaler_init_on_target(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
        scaler_init(self, r.device_type(scaler_slot, device), *args, **kwargs)

    patcher.set(autocast, "__init__", autocast_init_on_target)
    patcher.set(scaler, "__init__", scaler_init_on_target)
