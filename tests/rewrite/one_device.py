"""``python -m one_device PROGRAM ARGS...``: run PROGRAM with plain torch as if this machine had an accelerator
with one device, as a Mac has (MPS), simulated on the CPU; then end as :mod:`settled_exit` does.

``torch.accelerator`` reports one device, whose type is ``cpu`` (tensors really live on the CPU), and every
request for a device index other than 0 raises, as MPS does for ``mps:1``: ``set_device_index``,
``synchronize``, and the ``device`` given to any torch function or ``Tensor.to``. What a run under it
shows: the program never asks for a device the accelerator does not have. What it does not show: anything
about MPS's kernels.
"""

from __future__ import annotations

import os
import sys

import settled_exit
import torch
from torch.overrides import TorchFunctionMode

ACCELERATOR = torch.device("cpu")


def check(device: object) -> None:
    """Raise, as a one-device accelerator does, when ``device`` names a device index other than 0."""
    if isinstance(device, bool) or not isinstance(device, (str, int, torch.device)):
        return
    try:
        index = device if isinstance(device, int) else torch.device(device).index
    except RuntimeError:
        return  # not a device (a dtype given by name...)
    if index not in (None, 0):
        raise RuntimeError(f"device index {index} requested: the accelerator has one device (simulated)")


class OneDevice(TorchFunctionMode):
    """Checks the devices that torch functions and ``Tensor.to`` are given."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        check(kwargs.get("device"))
        if func is torch.Tensor.to:
            for arg in args[1:]:
                check(arg)
        return func(*args, **kwargs)


def _set_device_index(device: object) -> None:
    check(device)


def _synchronize(device: object = None) -> None:
    check(device)


def simulate() -> None:
    accelerator = torch.accelerator
    accelerator.is_available = lambda: True
    accelerator.current_accelerator = lambda check_available=False: ACCELERATOR
    accelerator.device_count = lambda: 1
    accelerator.current_device_index = lambda: 0
    accelerator.set_device_index = _set_device_index
    accelerator.synchronize = _synchronize
    OneDevice().__enter__()


if __name__ == "__main__":
    simulate()
    code = settled_exit.main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
