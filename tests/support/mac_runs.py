"""Running the same work on the CPU target and on the simulated Mac, to compare what the program gets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

import torchdevice


def host(value: Any) -> Any:
    """``value`` with its tensors copied to the host (read while the target is installed)."""
    return pytree.tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, value)


def on_both(work: Callable[[], Any]) -> tuple[Any, Any]:
    """``work()`` under the CPU target and on the simulated Mac, its tensors brought to the host: (cpu, mac)."""
    with torchdevice.installed("cpu"):
        native = host(work())
    with torchdevice.installed("mps-sim"):
        mac = host(work())
    return native, mac
