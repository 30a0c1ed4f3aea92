"""Tensor <-> ``mx.array`` conversion for the MLX route, and translation of torch argument values.

What is copied (measured with mlx 0.32.4, see ``tests/test_mlx_bridge.py`` and ``bench/bench_mlx.py``):

- torch -> MLX copies once: MLX owns the memory of its arrays and refuses to import a CPU buffer
  without a copy (``mx.from_dlpack(t, copy=False)`` raises). Tensors on another device (``mps``)
  are brought to the CPU first.
- MLX -> torch is zero-copy: ``torch.from_dlpack`` views the array's buffer (strides included)
  and keeps the array alive; the result is then moved to the device of the torch inputs. Arrays
  with negative or zero strides (MLX views such as flip or broadcast) are made contiguous first.

Dtypes: bool, uint8..uint64, int8..int64, float16, bfloat16, float32 and complex64 map one to one.
float64 (and complex128) are refused with :class:`MlxDtypeError`: MLX computes float64 on its CPU
stream only, not on the GPU, and silently narrowing would change results. ``to_mlx(t,
downcast=True)`` narrows float64 -> float32 (complex128 -> complex64) for callers that ask for it.

Every refusal is an :class:`MlxUnsupported`, so a caller can catch one exception type and run the
call elsewhere (CPU). Tensors that autograd records are refused too: MLX results carry no graph;
and empty tensors: there is nothing for MLX to speed up, and mlx 0.32.4 mishandles some (a half-precision
``prod`` over the empty axis of an imported ``(3, 0)`` array looped without end in the consistency
suite, depending on what ran before).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import mlx.core as mx
import torch

from torchdevice.device.aten import true_device


class MlxUnsupported(Exception):
    """This call cannot run on MLX as given (argument, dtype, autograd); run it elsewhere."""


def untranslatable(op: str, param: str) -> MlxUnsupported:
    """The error of a shim given a ``param`` value it has no MLX translation for."""
    return MlxUnsupported(f"{op}: {param} has no MLX translation for the value given")


def mlx_failed(op: str) -> MlxUnsupported:
    """The error of a shim whose MLX call raised (raised ``from`` MLX's error)."""
    return MlxUnsupported(f"{op}: MLX failed on the call")


class MlxDtypeError(MlxUnsupported, TypeError):
    """A torch dtype that MLX has no equivalent for."""

    def __init__(self, dtype: torch.dtype, hint: str = ""):
        super().__init__(f"MLX has no dtype for {dtype}{hint}")
        self.dtype = dtype


TORCH_TO_MLX: dict[torch.dtype, mx.Dtype] = {
    torch.bool: mx.bool_,
    torch.uint8: mx.uint8,
    torch.uint16: mx.uint16,
    torch.uint32: mx.uint32,
    torch.uint64: mx.uint64,
    torch.int8: mx.int8,
    torch.int16: mx.int16,
    torch.int32: mx.int32,
    torch.int64: mx.int64,
    torch.float16: mx.float16,
    torch.bfloat16: mx.bfloat16,
    torch.float32: mx.float32,
    torch.complex64: mx.complex64,
}
MLX_TO_TORCH: dict[mx.Dtype, torch.dtype] = {v: k for k, v in TORCH_TO_MLX.items()}
_NARROWED = {torch.float64: torch.float32, torch.complex128: torch.complex64}
FAMILIES: dict[str, tuple[torch.dtype, ...]] = {
    "float": (torch.float16, torch.bfloat16, torch.float32),
    "float32": (torch.float32,),
    "int": (torch.uint8, torch.uint16, torch.uint32, torch.uint64, torch.int8, torch.int16, torch.int32, torch.int64),
    "bool": (torch.bool,),
    "complex": (torch.complex64,),
}
"""Dtype families an MLX mapping declares it was verified for."""

MLX_ERRORS = (ValueError, IndexError, RuntimeError, TypeError)
"""What MLX raises for a call it cannot do; shims turn these into :class:`MlxUnsupported`, so the
call runs elsewhere and the user sees torch's own result or error."""

UNSET: Any = type("Unset", (), {"__repr__": lambda self: "<default>"})()
"""Default of shim parameters whose torch default is not a literal: any other value is refused."""


def mlx_dtype(dtype: torch.dtype) -> mx.Dtype:
    """The MLX dtype of a torch dtype; :class:`MlxDtypeError` when MLX has none."""
    try:
        return TORCH_TO_MLX[dtype]
    except KeyError:
        hint = " (pass downcast=True to narrow it)" if dtype in _NARROWED else ""
        raise MlxDtypeError(dtype, hint) from None


def torch_dtype(dtype: mx.Dtype) -> torch.dtype:
    return MLX_TO_TORCH[dtype]


def to_mlx(t: torch.Tensor, dtype: torch.dtype | None = None, *, downcast: bool = False) -> mx.array:
    """Copy tensor ``t`` into a new ``mx.array`` (cast to ``dtype`` when given)."""
    if t.requires_grad and torch.is_grad_enabled():
        raise MlxUnsupported("autograd records this tensor; MLX results would carry no gradient")
    if not t.numel():
        raise MlxUnsupported("an empty tensor: torch computes it")
    if downcast and t.dtype in _NARROWED:
        t = t.to(_NARROWED[t.dtype])
    source = mlx_dtype(t.dtype)  # refuses float64 even when a cast is asked for: it would narrow it
    target = source if dtype is None else mlx_dtype(dtype)
    if true_device(t).type != "cpu":
        t = t.cpu()
    a = mx.from_dlpack(t.detach().resolve_conj().resolve_neg())
    return a if source == target else a.astype(target)


def to_torch(a: mx.array, device: torch.device | None = None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """View array ``a`` as a tensor (no copy on the CPU); cast to ``dtype``, move to ``device``."""
    if dtype is not None:
        a = a.astype(mlx_dtype(dtype))
    # MLX views may have negative strides (flip) or zero strides (broadcast): torch aborts on the
    # former and cannot write into the latter, so such arrays are copied to a contiguous layout.
    strides = memoryview(a).strides or ()  # type: ignore[arg-type]  # mx.array exports a buffer
    if any(s <= 0 for s, n in zip(strides, a.shape, strict=True) if n > 1):
        a = mx.contiguous(a)
    t = torch.from_dlpack(a)
    return t if device is None or device.type == "cpu" else t.to(device)


def arg(x: Any, dtype: torch.dtype | None = None) -> Any:
    """An argument for an MLX call: tensors (also inside lists/tuples) become arrays, the rest stays."""
    if isinstance(x, torch.Tensor):
        return to_mlx(x, dtype)
    if isinstance(x, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in x):
        return [arg(v, dtype) for v in x]
    return x


def device_of(*values: Any) -> torch.device | None:
    """The device of the first tensor among ``values`` (searching lists/tuples); None if none."""
    for v in values:
        if isinstance(v, torch.Tensor):
            return true_device(v)
        if isinstance(v, (list, tuple)):
            found = device_of(*v)
            if found is not None:
                return found
    return None


@cache
def _family(families: tuple[str, ...]) -> frozenset[torch.dtype]:
    return frozenset(d for f in families for d in FAMILIES[f])


def check_dtype(op: str, x: Any, families: tuple[str, ...]) -> None:
    """Refuse a tensor ``x`` (or tensors in a list ``x``) outside the dtype families the mapping
    was verified for."""
    if isinstance(x, (list, tuple)):
        for v in x:
            check_dtype(op, v, families)
    elif isinstance(x, torch.Tensor) and x.dtype not in _family(families):
        mlx_dtype(x.dtype)  # MlxDtypeError for a dtype MLX lacks
        raise MlxUnsupported(f"{op}: mapped for {'/'.join(families)} inputs, got {x.dtype}")


def check_nonempty(op: str, *values: Any) -> None:
    """Refuse tensors with no elements where MLX would crash on them."""
    for v in values:
        if isinstance(v, torch.Tensor) and v.numel() == 0:
            raise MlxUnsupported(f"{op}: MLX cannot take an empty tensor here")


# --- input casts done before the MLX call ---------------------------------------------------------

def opmath(x: Any) -> Any:
    """A float16 or bfloat16 array (or list of arrays) as float32: what torch's kernels compute half
    precision in (its "opmath" type), rounding the result once."""
    if isinstance(x, list):
        return [opmath(v) for v in x]
    if isinstance(x, mx.array) and x.dtype in (mx.float16, mx.bfloat16):
        return x.astype(mx.float32)
    return x


def cast_input(x: mx.array, dtype: torch.dtype | None, *, accumulate: bool = False) -> mx.array:
    """torch's ``dtype=``: cast the input before the op. ``accumulate``: sums and products of
    integral or bool inputs accumulate in int64 when no dtype is given (torch.sum, cumsum, prod)."""
    if dtype is None:
        if accumulate and (mx.issubdtype(x.dtype, mx.integer) or x.dtype == mx.bool_):
            return x.astype(mx.int64)
        return x
    return x.astype(mlx_dtype(dtype))


# --- argument value translations: ``translate_<kind>(value, ref)``; ref is the first tensor input ---

def translate_axis(value: int | Sequence[int] | None, ref: Any) -> int | list[int] | None:
    """A torch ``dim`` for MLX: ``None`` or ``()`` reduce everything, and a 0-d tensor takes
    ``dim`` 0 or -1 (MLX takes no axis for a 0-d array)."""
    if value is None or isinstance(value, int):
        dims: tuple[int, ...] = () if value is None else (value,)
    else:
        dims = tuple(value)
    if not dims or (isinstance(ref, torch.Tensor) and ref.dim() == 0 and set(dims) <= {0, -1}):
        return None
    return value if isinstance(value, int) else list(dims)


def translate_vector_axis(value: int | Sequence[int] | None, ref: torch.Tensor) -> int | None:
    """torch.linalg.vector_norm's ``dim`` for MLX's norm, which takes a vector norm over one axis
    only (None flattens only a 1-d input; two axes would make it a matrix norm)."""
    if value is None and ref.dim() <= 1:
        return None
    dims = (value,) if isinstance(value, int) else tuple(value or ())
    if len(dims) != 1:
        raise MlxUnsupported(f"dim={value}: MLX's norm takes a vector norm over one axis")
    return dims[0]


def translate_ddof_correction(value: float | None, ref: Any) -> int:
    """torch ``correction`` (None means 1) -> MLX ``ddof`` (an integer)."""
    if value is None:
        return 1
    if float(value) != int(value):
        raise MlxUnsupported(f"correction={value}: MLX takes an integral ddof")
    return int(value)


def translate_repeats(value: Sequence[Any], ref: torch.Tensor) -> tuple[int, ...]:
    """Tensor.repeat's sizes, at least one per dimension of the input (as torch demands)."""
    sizes = tuple(int(v) for v in value)
    if len(sizes) < ref.dim():
        raise MlxUnsupported(f"repeat({sizes}) has fewer sizes than the input has dimensions")
    return sizes


REDUCTIONS = ("none", "mean", "sum")
"""aten's ``int reduction`` (``at::Reduction``) as the names MLX's losses take."""


def translate_reduction(value: int, ref: Any) -> str:
    return REDUCTIONS[value]


def translate_zero_if_none(value: float | None, ref: Any) -> float:
    """A fill value whose None means 0 (torch.nn.functional.pad's ``value``)."""
    return 0 if value is None else value
