"""Walking an aten call's arguments and results, which nest only lists and tuples of tensors and scalars.

``torch.utils._pytree`` handles any structure, at ten times the cost per call; the fallback routes and
hosted tensors walk every call they run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def tree_map(fn: Callable[..., Any], value: Any, *extra: Any) -> Any:
    """``value`` with each leaf ``x`` (anything but a list or tuple) replaced by ``fn(x, *extra)``, in
    containers of the same types (lists, tuples, ``torch.Size``, ``torch.return_types``)."""
    if isinstance(value, (list, tuple)):
        items = [tree_map(fn, v, *extra) for v in value]
        return items if type(value) is list else type(value)(items)
    return fn(value, *extra)


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    return []
