"""``DistributedDataParallel(model, device_ids=[local_rank], output_device=local_rank)`` off CUDA.

The indices name CUDA devices. DDP wants ``device_ids=None`` for a CPU module and the module's own
device for an accelerator module, so both arguments are replaced by what the module's parameters
say: ``None`` on the CPU (or for a module spread over several devices), else that device. On the
simulated GPUs (``cuda-sim``) ``cuda:i`` is a device of its own: the arguments are kept, and DDP
takes them as on CUDA (a rank whose model is on another GPU than its ``device_ids`` fails as there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.device.aten import true_device
from torchdevice.device.placement import invalid_ordinal


def module_device_ids(module: torch.nn.Module) -> list[torch.device] | None:
    """What ``device_ids`` must be for DDP to accept ``module`` where it now lives (the device DDP computes with)."""
    devices = {true_device(p) for p in module.parameters()}
    if len(devices) != 1:
        return None
    (device,) = devices
    return None if device.type == "cpu" else [device]


def on_module_device(init: Callable[..., None], devices: int, follow: bool = True) -> Callable[..., None]:
    """Wrap ``DistributedDataParallel.__init__`` as described above (``follow``: the arguments follow the
    module; else they are kept); an index of no emulated device (``devices`` of them) raises the error CUDA
    raises for it."""

    @functools.wraps(init)
    def __init__(
        self: Any, module: torch.nn.Module, device_ids: Any = None, output_device: Any = None, *args: Any, **kwargs: Any
    ) -> None:
        if device_ids or output_device is not None:
            for given in [*(device_ids or ()), *([] if output_device is None else [output_device])]:
                index = given if isinstance(given, int) else torch.device(given).index
                if index is not None and index >= devices:
                    raise invalid_ordinal(index, devices)
            if follow:
                device_ids = module_device_ids(module)
                output_device = device_ids[0] if device_ids else None
        init(self, module, device_ids, output_device, *args, **kwargs)

    return __init__
