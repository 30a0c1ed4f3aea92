"""torch validates, MLX computes: torch's own checks of a call before another library computes it.

:func:`meta_outputs` runs the call's aten overload on ``meta`` tensors (shape, strides and dtype of
the arguments, no data): torch's meta kernels make every check that does not need the data, so an
invalid call raises torch's exception, and a valid one gives the shapes and dtypes of the results.
:func:`expect` is the same for a route: a call torch rejects raises :class:`Rejected`, so the
caller runs it on torch's own kernel, which raises torch's exact exception (a meta kernel's message
sometimes differs from the device kernel's: ``trace``, ``flip``, ``softshrink``). :func:`conform`
then holds a result computed elsewhere to the expected one: a dtype is cast to torch's, a shape or
structure that differs raises :class:`ResultMismatch` (a mapping bug, logged and counted). Checks
that need the data, index ranges and integer division by zero, are :mod:`.data_checks`.

An overload without a meta kernel of its own (no ``Meta`` kernel, no structured composite) cannot
be checked this way: :func:`checkable` says so, and its calls are declined (:class:`Unverifiable`).
Of the mapped overloads the engine registers, two are such: ``aten::equal`` (no meta kernel) and
``aten::allclose`` (a composite that reads the data). Every such call is :class:`Declined`, which
the engine treats like a shim's ``MlxUnsupported``: torch's kernel runs the call. This module
imports no MLX.
"""

from __future__ import annotations

import logging
from collections import Counter
from functools import cache
from typing import Any

import torch

from torchdevice.device.aten import OpSchema, true_device

log = logging.getLogger("torchdevice.fallback")

META = torch.device("meta")
_META_KEYS = ("Meta", "CompositeExplicitAutogradNonFunctional")
"""Dispatch keys whose kernels compute a result on meta tensors for the op itself: meta kernels
and the structured composites PyTorch also registers for ``Meta``. A ``CompositeExplicitAutograd``
kernel is generic code that may read the data (``allclose`` calls ``item()``), so it does not count."""

KNOWN_LIMIT = 4096
known: dict[Any, Any] = {}
"""Meta results by call signature (:func:`meta_outputs`), at most ``KNOWN_LIMIT``: emptied when full."""

mismatches: Counter[str] = Counter()
"""Per aten overload: results declined by :func:`conform` (each is a mapping bug)."""


class Declined(Exception):
    """This call is not computed elsewhere: torch's kernel runs it."""


class Unverifiable(Declined):
    """torch cannot check this call on meta tensors, so it is not given to MLX."""


class Rejected(Declined):
    """torch rejects this call (the cause is torch's exception): torch's kernel raises the error."""


class ResultMismatch(Declined):
    """A result computed elsewhere has another shape or structure than torch's: it is not used."""


@cache
def checkable(op: torch._ops.OpOverload) -> bool:
    """Whether torch can check calls of ``op`` on meta tensors."""
    return any(torch._C._dispatch_has_kernel_for_dispatch_key(op._name, key) for key in _META_KEYS)


def meta_outputs(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The result of ``op(*args, **kwargs)`` as meta tensors, computed from the arguments' shapes,
    strides and dtypes alone; torch's own exception for a call torch rejects.

    Results are remembered per call signature (op, each tensor's shape, strides, dtype and device,
    the other arguments' types and values): most of torch's meta kernels are Python functions
    (``torch/_meta_registrations.py``) costing 30-300 µs a call, a look-up costs a few.
    :class:`Unverifiable` where torch cannot check the call: no meta kernel; a sparse or other
    non-strided tensor; non-scalar tensors on two devices, or an argument written that overlaps
    another in memory, which torch rejects but fresh meta tensors would not."""
    if not checkable(op):
        raise Unverifiable(f"{op._name} has no meta kernel: torch cannot check the call")
    written = OpSchema.of(op).written
    if written and _overlaps(written, args, kwargs):
        raise Unverifiable(f"{op._name}: an argument written overlaps another; torch's kernel decides")
    key: Any = (op, _signature(args), _signature(tuple(kwargs.items())))
    try:
        remembered = known.get(key)
    except TypeError:  # an unhashable argument: not remembered
        key = remembered = None
    if remembered is not None:
        return remembered
    devices: set[torch.device] = set()
    meta_args = tuple(_meta(a, devices) for a in args)
    meta_kwargs = {k: _meta(v, devices) for k, v in kwargs.items()}
    if len(devices) > 1:
        raise Unverifiable(f"{op._name}: tensors on {sorted(map(str, devices))}; torch's kernel decides")
    result = op(*meta_args, **meta_kwargs)
    if key is not None:
        if len(known) >= KNOWN_LIMIT:
            known.clear()
        known[key] = result
    return result


def expect(op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """:func:`meta_outputs`, with a call torch rejects refused as :class:`Rejected`; an in-place call whose
    result (its functional op's, on meta tensors) cannot be cast to ``self``'s dtype is rejected too, as
    torch's kernels reject it (``mul_`` of an integer tensor by a float: "result type Float can't be cast
    to the desired output type Long"), though some meta kernels do not."""
    try:
        result = meta_outputs(op, args, kwargs)
        functional = _functional(op)
        if functional is not None and args and isinstance(args[0], torch.Tensor):
            computed = meta_outputs(functional, args, kwargs)
            if isinstance(computed, torch.Tensor) and not torch.can_cast(computed.dtype, args[0].dtype):
                raise Rejected(f"{op._name}: result type {computed.dtype} cannot be cast to {args[0].dtype}")
        return result
    except Declined:
        raise
    except Exception as exc:  # whatever torch raises for the call, the kernel that runs it raises
        raise Rejected(f"{op._name}: torch rejects the call") from exc


@cache
def _functional(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The functional op of in-place ``op`` (``aten::mul.Tensor`` for ``aten::mul_.Tensor``), if it has one
    with a meta kernel."""
    name = op._schema.name.removeprefix("aten::")
    if not name.endswith("_") or name.startswith("_") or not OpSchema.of(op).written == (0,):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    functional = getattr(packet, op._overloadname, None) if packet is not None else None
    if functional is None or not checkable(functional):
        return None
    parameters = [str(a.type) for a in op._schema.arguments]  # pow_.Scalar's functional is pow.Tensor_Scalar
    return functional if [str(a.type) for a in functional._schema.arguments] == parameters else None


def conform(op: str, value: Any, expected: Any) -> Any:
    """``value`` (computed elsewhere) with the dtypes of ``expected`` (:func:`meta_outputs`); a
    :class:`ResultMismatch` when its shapes or structure differ (logged and counted per ``op``)."""
    try:
        return _conform(value, expected)
    except ResultMismatch as exc:
        if not mismatches[op]:
            log.warning("fallback %s: the MLX result does not match torch's (%s); computed elsewhere", op, exc)
        mismatches[op] += 1
        raise


def _signature(value: Any) -> Any:
    """What a meta kernel's result depends on, hashable (``TypeError`` where it cannot be)."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            raise Unverifiable(f"a {value.layout} tensor")
        return value.shape, value.stride(), value.dtype, true_device(value)
    if isinstance(value, (list, tuple)):
        return tuple(_signature(v) for v in value)
    return type(value), value  # 1, 1.0 and True are equal keys, not equal arguments


def _overlaps(positions: tuple[int | str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a tensor written (at ``positions``) shares memory with another tensor argument."""
    tensors = [t for t in (*args, *kwargs.values()) for t in (t if isinstance(t, (list, tuple)) else (t,))
               if isinstance(t, torch.Tensor)]
    for where in positions:
        out = args[where] if isinstance(where, int) and where < len(args) else kwargs.get(str(where))
        if isinstance(out, torch.Tensor) and any(t is not out and torch._C._overlaps(t, out) for t in tensors):
            return True
    return False


def _meta(x: Any, devices: set[torch.device]) -> Any:
    if isinstance(x, torch.Tensor):
        if x.layout != torch.strided:
            raise Unverifiable(f"a {x.layout} tensor")
        if x.dim():
            devices.add(true_device(x))
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=META)
    if isinstance(x, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in x):
        return [_meta(v, devices) for v in x]
    return x


def _conform(value: Any, expected: Any) -> Any:
    if isinstance(expected, torch.Tensor):
        if not isinstance(value, torch.Tensor):
            raise ResultMismatch(f"{type(value).__name__} where torch gives a tensor")
        if value.shape != expected.shape:
            raise ResultMismatch(f"shape {tuple(value.shape)} where torch gives {tuple(expected.shape)}")
        return value if value.dtype == expected.dtype else value.to(expected.dtype)
    if isinstance(expected, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(expected):
            raise ResultMismatch(f"{type(value).__name__} where torch gives {len(expected)} results")
        items = [_conform(v, e) for v, e in zip(value, expected, strict=True)]
        return items if type(value) is list else type(value)(items)
    if type(value) is not type(expected):
        raise ResultMismatch(f"{type(value).__name__} where torch gives {type(expected).__name__}")
    return value
