"""The checks of a call that need its data, for shims to make before their MLX call.

Meta kernels (:mod:`.validate`) check everything but the values: an index out of range or an
integer division by zero passes them, and MLX would read outside the array or return garbage. A
shim calls these on its converted arguments; a call that fails one is refused with
:class:`~.validate.Rejected`, and the engine runs it on torch's kernel, which raises torch's own
exception. The error is therefore torch's exactly, including what differs between kernel paths of
one op (on the CPU, ``index_select`` raises ``IndexError: index out of range in self``, except on
dimension 1 of a tensor of two or more dimensions, where it raises ``RuntimeError: INDICES element
is out of DATA bounds, id=7 axis_dim=4``; ``index_add`` raises ``RuntimeError`` or ``IndexError``
depending on ``alpha`` and the index dtype).

The checks compute on the MLX arrays the shim already holds, not through torch ops, which the
engine may itself route to MLX. Each costs one reduction over the index or divisor and a read of
its result (a synchronization), as torch's CPU kernels' own checks do.
"""

from __future__ import annotations

import mlx.core as mx
import torch

from torchdevice.fallback.validate import Rejected


def size(t: torch.Tensor, dim: int | None) -> int:
    """How many entries indices into ``t`` address: along ``dim``, or all of them (``None``); a 0-d
    tensor counts as one entry, as torch's index checks take it."""
    if dim is None:
        return t.numel()
    return t.shape[dim] if t.dim() else 1


def index_range(op: str, index: mx.array, size: int, *, wraps: bool = False) -> None:
    """Refuse indices outside ``[0, size)``; with ``wraps`` (torch counts negative indices from the
    end: ``take``, advanced indexing, ``index_fill``, ``index_put``), outside ``[-size, size)``."""
    if index.size and mx.any((index < (-size if wraps else 0)) | (index >= size)).item():
        raise Rejected(f"{op}: index out of range")


def nonzero_divisor(op: str, divisor: mx.array | bool | int | float, dtype: torch.dtype) -> None:
    """Refuse a division computed in integral ``dtype`` whose divisor has a zero (torch raises
    ``RuntimeError: ZeroDivisionError`` for ``floor_divide``, ``remainder``, ``fmod`` and ``div``
    with a ``rounding_mode``; true division and floating dtypes give inf or nan)."""
    if dtype.is_floating_point or dtype.is_complex:
        return
    if isinstance(divisor, mx.array):
        zero = divisor.size and not mx.all(divisor != 0).item()
    else:
        zero = divisor == 0
    if zero:
        raise Rejected(f"{op}: integer division by zero")


def representable(op: str, value: object, dtype: torch.dtype) -> None:
    """Refuse a Python scalar that ``dtype`` cannot hold (torch raises ``value cannot be converted to
    type ... without overflow``): a finite float beyond the dtype's range, an integer outside it, a
    complex number with an imaginary part for a real dtype."""
    if isinstance(value, torch.Tensor) or isinstance(value, bool) or dtype == torch.bool:
        return
    if isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise Rejected(f"{op}: {value} is no 64-bit integer")  # torch: "int too big to convert"
    if isinstance(value, complex):
        if value.imag and not dtype.is_complex:
            raise Rejected(f"{op}: complex value for {dtype}")
        value = value.real
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype) if not dtype.is_complex else None
    if info is None or not isinstance(value, (int, float)):
        return
    finite = not isinstance(value, float) or abs(value) != float("inf") and value == value
    if finite and not info.min <= value <= info.max:
        raise Rejected(f"{op}: {value!r} overflows {dtype}")


def integer_power(op: str, base: object, exponent: object) -> None:
    """Refuse an integral tensor raised to a negative integral scalar (torch raises ``Integers to negative
    integer powers are not allowed.``; MLX computes 0)."""
    if (isinstance(base, torch.Tensor) and not (base.dtype.is_floating_point or base.dtype.is_complex)
            and isinstance(exponent, int) and not isinstance(exponent, bool) and exponent < 0):
        raise Rejected(f"{op}: integer to a negative integer power")


def unit_interval(op: str, values: mx.array) -> None:
    """Refuse values outside [0, 1], nan included (torch's ``binary_cross_entropy`` raises ``all elements
    of input should be between 0 and 1``; MLX computes nan)."""
    if values.size and not mx.all((values >= 0) & (values <= 1)).item():
        raise Rejected(f"{op}: values outside [0, 1]")
