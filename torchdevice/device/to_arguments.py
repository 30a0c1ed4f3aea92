"""What a ``Tensor.to(...)`` call asks for, in whichever of its forms it is written.

``to(device=None, dtype=None, non_blocking=False, copy=False, *, memory_format)``, ``to(dtype, non_blocking,
copy)`` and ``to(other, non_blocking, copy)``: the runtime's moves, the hosted tensors and the simulated
Mac's device tensors each decide from these what a move does, so they read them in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from torchdevice.device.aten import true_device


@dataclass(frozen=True)
class ToArguments:
    device: torch.device | None
    dtype: torch.dtype | None
    non_blocking: bool
    copy: bool
    memory_format: torch.memory_format | None


def parse_to(args: tuple[Any, ...], kwargs: dict[str, Any]) -> ToArguments:
    """The arguments of ``t.to(*args, **kwargs)`` (``t`` left out); raises torch's ``TypeError`` for a call
    that is none of the forms."""
    rest, options = list(args), dict(kwargs)
    copy = options.pop("copy", False)
    if sum(isinstance(a, bool) for a in rest) == 2:  # (..., non_blocking, copy)
        copy = rest.pop()
    other = rest[0] if rest and isinstance(rest[0], torch.Tensor) else options.get("other")
    if other is not None:
        non_blocking = rest[1] if len(rest) > 1 else options.get("non_blocking", False)
        return ToArguments(true_device(other), other.dtype, non_blocking, copy, torch.preserve_format)
    device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*rest, **options)
    return ToArguments(device, dtype, non_blocking, copy, memory_format)
