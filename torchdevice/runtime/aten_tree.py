"""Walking the arguments and results of aten calls and torch functions, which nest lists and tuples (named
ones included) of tensors and scalars, and keyword dictionaries.

``torch.utils._pytree`` handles any structure, at ten times the cost per call; the fallback routes, hosted
tensors and the simulated device walk every call they run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def tree_map(fn: Callable[..., Any], value: Any, *extra: Any) -> Any:
    """``value`` with each leaf ``x`` (anything but a list or tuple) replaced by ``fn(x, *extra)``, in
    containers of the same types (lists, tuples, ``torch.Size``, ``torch.return_types``, named tuples such
    as ``PackedSequence``)."""
    if isinstance(value, (list, tuple)):
        items = [tree_map(fn, v, *extra) for v in value]
        kind = type(value)
        if kind is list:
            return items
        return kind._make(items) if hasattr(kind, "_make") else kind(items)
    return fn(value, *extra)


def leaves(value: Any) -> list[Any]:
    """The leaves of ``value`` (through lists, tuples and dictionaries' values), in order."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    return [value]


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, in order."""
    return [x for x in leaves(value) if isinstance(x, torch.Tensor)]
