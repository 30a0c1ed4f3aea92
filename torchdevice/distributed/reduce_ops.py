"""NCCL's reduce ops, as NCCL computes them, for process groups asked for NCCL (which run on gloo).

``all_reduce``, ``reduce``, ``reduce_scatter``, ``reduce_scatter_single`` (and through it
``reduce_scatter_tensor`` and ``_reduce_scatter_base``) and ``all_reduce_coalesced`` give, on such a group,
what torch's NCCL backend gives, in place and in the tensor's own dtype, synchronously or through the
``Work``/``Future`` of ``async_op=True``; they refuse what it refuses, with its exception and message, at
the call. Groups of other backends are left to them.

What NCCL computes (torch 2.13's ``ProcessGroupNCCL.cpp``: ``getNcclReduceOp``, ``complexViewAsRealAllowed``;
its ``NCCLUtils``: ``getNcclDataType``; NCCL 2.30's ``src/enqueue.cc``: ``hostToDevRedOp``, and
``src/device/reduce_kernel.h``):

- **dtypes**: bool (as uint8), uint8, int8, int32, int64, float16, bfloat16, float32, float64; anything
  else raises ``TypeError: Input tensor data type is not supported for NCCL process group: Short``. Complex
  tensors are reduced as their real view for SUM, AVG and PREMUL_SUM (``all_reduce``, ``reduce``); the other
  ops refuse them, and ``reduce_scatter`` refuses complex dtypes. The ``fnuz`` and ``e8m0`` float8 types
  raise ``Unsupported Float8 type for NCCL reduction``.
- **bool**: SUM is computed as MAX (a logical or); AVG raises ``TypeError``.
- **AVG**: integers are summed (wrapping around in the dtype, as the hardware adds) and the sum is divided
  by the group's size rounding toward zero (``FuncSumPostDiv::divide``: the magnitude is divided, the sign
  restored); floats are each multiplied by ``1/size`` rounded to their dtype (``float(1.0/nRanks)`` converted
  to half or bfloat16), then summed (``FuncPreMulSum``): an average of values near the dtype's maximum does
  not overflow, as summing first would.
- **PREMUL_SUM** (``ReduceOp.PREMUL_SUM(factor)``, ``_make_nccl_premul_sum``): each value times the factor
  in the dtype, then the sum; float dtypes only (``TypeError`` otherwise); a tensor factor must have the
  tensor's dtype. (torch's NCCL backend passes a bfloat16 tensor's factor as a float, which NCCL reads as
  two bytes: zero for powers of two, pytorch/pytorch#190745; here bfloat16 gets the factor it was given.)
- **MIN/MAX** of floats ignore NaN (``fminf``/``fmaxf``, ``__hmin``/``__hmax``): NaN only where every
  rank has NaN; gloo's comparison would let a NaN win or lose by rank order. They run on integer keys
  that order floats as numbers, NaN lowest (MAX) or highest (MIN).
- **BAND/BOR/BXOR** raise ``ValueError: Cannot use ReduceOp.BAND with NCCL``.
- ``reduce`` leaves the tensor of every rank but the destination as it was (NCCL writes only the root's
  receive buffer; gloo's reduce may leave partial results in the others).

Float sums over more than two ranks add in another order than NCCL's ring: the last bits may differ.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torchdevice.distributed.flat import counted, flat
from torchdevice.distributed.groups import nccl_call_group
from torchdevice.patching import Patcher

if torch.distributed.is_available():
    from torch.distributed import ReduceOp

    _SUM = ReduceOp.SUM

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
NCCL_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, *FLOATS,
                         torch.float8_e4m3fn, torch.float8_e5m2})
UNSUPPORTED_FLOAT8 = frozenset({torch.float8_e4m3fnuz, torch.float8_e5m2fnuz, torch.float8_e8m0fnu})
KEYS = {torch.float16: (torch.int16, torch.int32), torch.bfloat16: (torch.int16, torch.int32),
        torch.float32: (torch.int32, torch.int32), torch.float64: (torch.int64, torch.int64)}
"""Float dtype -> (the integer dtype of its bits, the dtype its order keys travel in: gloo has no int16)."""


@dataclass(frozen=True)
class Reduction:
    """One NCCL reduction as a gloo reduction: what each rank sends, how gloo combines it, what is kept."""

    op: Any
    """The gloo op (a ``ReduceOp.RedOpType``)."""
    scale: torch.Tensor | None = None
    """Each value is multiplied by this 0-dim tensor of the tensor's dtype before the sum."""
    divisor: int = 0
    """The integer sum is divided by this, rounding toward zero."""
    keys: bool = False
    """MIN/MAX of floats through order keys, NaN ignored."""

    def send(self, x: torch.Tensor, in_place: bool) -> torch.Tensor:
        """What this rank sends for ``x``: ``x`` itself where it may be changed (``in_place``) or needs no change,
        else a new tensor."""
        if self.keys:
            return _order_keys(x, nan_lowest=self.op == ReduceOp.MAX)
        if self.scale is not None:
            return x.mul_(self.scale) if in_place else x.mul(self.scale)
        return x

    def buffer(self, out: torch.Tensor) -> torch.Tensor:
        """Where gloo writes the result meant for ``out``."""
        return torch.empty_like(out, dtype=KEYS[out.dtype][1]) if self.keys else out

    def receive(self, wire: torch.Tensor, out: torch.Tensor) -> None:
        """Write the reduced ``wire`` into ``out`` as NCCL leaves it."""
        if self.keys:
            value = _from_order_keys(wire, out.dtype)
        elif self.divisor:
            value = wire.div_(self.divisor, rounding_mode="trunc")
        else:
            value = wire
        if value is not out:
            out.copy_(value)


def reduction(op: Any, dtype: torch.dtype, size: int, collective: str) -> Reduction:
    """The gloo reduction that computes NCCL's ``op`` over ``size`` ranks, or torch's exception for it on NCCL.

    ``collective``: ``all_reduce`` (also ``all_reduce_coalesced``), ``reduce`` or ``reduce_scatter``."""
    kind = _kind(op)
    if dtype.is_complex:
        if collective == "reduce_scatter":
            raise TypeError(f"Input tensor data type is not supported for NCCL process group: {_scalar_type(dtype)}")
        if kind not in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PREMUL_SUM):
            if collective == "reduce":  # torch streams the op into this message as nothing
                raise RuntimeError("reduce does not supporton complex tensors")
            raise ValueError(f"all_reduce does not support {op} on complex tensors")
        dtype = torch.empty(0, dtype=dtype).real.dtype
    if dtype in UNSUPPORTED_FLOAT8:
        raise RuntimeError("Unsupported Float8 type for NCCL reduction")
    if dtype not in NCCL_DTYPES:
        raise TypeError(f"Input tensor data type is not supported for NCCL process group: {_scalar_type(dtype)}")
    if dtype == torch.bool:
        if kind == ReduceOp.SUM:
            return Reduction(ReduceOp.MAX)
        if kind == ReduceOp.AVG:
            raise TypeError("Cannot use ReduceOp.AVG with boolean inputs")
    if kind == ReduceOp.PREMUL_SUM:
        if dtype not in FLOATS:
            raise TypeError("PreMulSum Data type must be half, float, bfloat16 or double")
        return Reduction(ReduceOp.SUM, scale=_factor(op.factor, dtype))
    if kind in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        raise ValueError(f"Cannot use ReduceOp.{kind.name} with NCCL")
    if kind == ReduceOp.AVG:
        if dtype in FLOATS:
            return Reduction(ReduceOp.SUM, scale=_factor(1.0 / size, dtype))
        return Reduction(ReduceOp.SUM, divisor=size)
    if kind not in (ReduceOp.SUM, ReduceOp.PRODUCT, ReduceOp.MIN, ReduceOp.MAX):
        raise ValueError("Unhandled ReduceOp")
    return Reduction(kind, keys=kind in (ReduceOp.MIN, ReduceOp.MAX) and dtype in FLOATS)


def patch(patcher: Patcher) -> None:
    """Put the NCCL reductions in ``torch.distributed`` (and ``distributed_c10d``, where the deprecated
    forms find ``reduce_scatter_single``; before torch 2.13, which has none, ``reduce_scatter_tensor``, where
    ``_reduce_scatter_base`` finds it)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    single = "reduce_scatter_single" if hasattr(c10d, "reduce_scatter_single") else "reduce_scatter_tensor"
    for name, make in (("all_reduce", _all_reduce), ("reduce", _reduce), ("reduce_scatter", _reduce_scatter),
                       (single, _reduce_scatter_single), ("all_reduce_coalesced", _all_reduce_coalesced)):
        wrapped = make(getattr(c10d, name))
        patcher.set(c10d, name, wrapped)
        patcher.set(dist, name, wrapped)


# -- the collectives ---------------------------------------------------------------------------------


def _all_reduce(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def all_reduce(tensor: Any, op: Any = _SUM, group: Any = None, async_op: bool = False) -> Any:
        plan = _plan(group, op, [tensor], "all_reduce")
        if plan is None:
            return original(tensor, op, group, async_op)
        how, (real,) = plan
        wire = how.send(real, in_place=True)
        return _then(original(wire, how.op, group, async_op), async_op, lambda: how.receive(wire, real))

    return all_reduce


def _all_reduce_coalesced(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def all_reduce_coalesced(tensors: Any, op: Any = _SUM, group: Any = None, async_op: bool = False) -> Any:
        listed = [tensors] if isinstance(tensors, torch.Tensor) else tensors
        plan = _plan(group, op, listed if isinstance(listed, (list, tuple)) else [listed], "all_reduce")
        if plan is None:
            return original(tensors, op, group, async_op)
        how, reals = plan
        wires = [how.send(real, in_place=True) for real in reals]

        def receive() -> None:
            for wire, real in zip(wires, reals, strict=True):
                how.receive(wire, real)

        return _then(original(wires, how.op, group, async_op), async_op, receive)

    return all_reduce_coalesced


def _reduce(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def reduce(tensor: Any, dst: Any = None, op: Any = _SUM, group: Any = None, async_op: bool = False,
               group_dst: Any = None) -> Any:
        plan = _plan(group, op, [tensor], "reduce")
        if plan is None:
            return original(tensor, dst, op, group, async_op, group_dst)
        import torch.distributed.distributed_c10d as c10d

        how, (real,) = plan
        chosen = c10d._group_or_default_group(group)
        root = c10d._canonicalize_group_rank(chosen, dst, group_dst, return_global=False) == chosen.rank()
        wire = how.send(real.clone(), in_place=True)  # gloo may write into the other ranks' tensors
        work = original(wire, dst, how.op, group, async_op, group_dst)
        return _then(work, async_op, (lambda: how.receive(wire, real)) if root else None)

    return reduce


def _reduce_scatter(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def reduce_scatter(output: Any, input_list: Any, op: Any = _SUM, group: Any = None,
                       async_op: bool = False) -> Any:
        listed = [output, *input_list] if isinstance(input_list, (list, tuple)) else []
        plan = _plan(group, op, listed, "reduce_scatter")
        if plan is None:
            return original(output, input_list, op, group, async_op)
        how, _ = plan
        wire = how.buffer(output)
        work = original(wire, [how.send(x, in_place=False) for x in input_list], how.op, group, async_op)
        return _then(work, async_op, lambda: how.receive(wire, output))

    return reduce_scatter


def _reduce_scatter_single(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def reduce_scatter_single(output: Any, input: Any, op: Any = _SUM, group: Any = None,
                              async_op: bool = False) -> Any:
        plan = _plan(group, op, [output, input], "reduce_scatter")
        if plan is None:
            return original(output, input, op, group, async_op)
        how, _ = plan
        counted(output, input, torch.distributed.get_world_size(group), gathering=False)
        output, input = flat(output, input)  # NCCL sees memory; gloo wants the shapes of a concatenation
        wire = how.buffer(output)
        work = original(wire, how.send(input, in_place=False), how.op, group, async_op)
        return _then(work, async_op, lambda: how.receive(wire, output))

    return reduce_scatter_single


def _plan(group: Any, op: Any, tensors: Any, collective: str) -> tuple[Reduction, list[torch.Tensor]] | None:
    """The reduction and the (real views of the) tensors, for a call on a group asked for NCCL that this rank
    takes part in; ``None`` for the calls the original function handles as it is."""
    chosen = nccl_call_group(group, *tensors) if isinstance(op, ReduceOp) else None
    if chosen is None:
        return None
    how = reduction(op, tensors[0].dtype, chosen.size(), collective)
    return how, [torch.view_as_real(t) if t.is_complex() else t for t in tensors]


def _then(work: Any, async_op: bool, after: Callable[[], None] | None) -> Any:
    """``work`` (a ``Work``, a ``Future``, or None once done) with ``after`` run when it completes."""
    if after is None or work is None and async_op:
        return work
    if not async_op:
        after()
        return None
    if isinstance(work, torch._C.Future):  # all_reduce_coalesced hands back its future
        return work.then(lambda done: (done.value(), after())[0])
    from torch._C._distributed_c10d import PythonCallbackWork, _create_work_from_future  # type: ignore[attr-defined]

    try:
        future = work.get_future()
    except RuntimeError:  # gloo's reduce_scatter_single has no future: run ``after`` in the first wait
        finished: list[bool] = []

        def wait(timeout: Any) -> bool:
            work.wait(timeout)
            if not finished:
                after()
                finished.append(True)
            return True

        return PythonCallbackWork(wait)
    return _create_work_from_future(future.then(lambda done: (done.value(), after())[0]))


# -- values ------------------------------------------------------------------------------------------


def _kind(op: Any) -> Any:
    """The ``RedOpType`` of ``op`` (``ReduceOp.SUM`` is one; ``ReduceOp.PREMUL_SUM(f)`` is a ``ReduceOp``, and
    ``isinstance`` says a ``RedOpType`` is one too)."""
    return op if isinstance(op, ReduceOp.RedOpType) else op.op


def _factor(value: Any, dtype: torch.dtype) -> torch.Tensor:
    """A multiplier as NCCL holds it: a host scalar converted to ``dtype`` through float (C++'s ``T(double)``:
    ``c10::Half`` and ``c10::BFloat16`` are made from a float), a tensor read as one of ``dtype``."""
    if isinstance(value, torch.Tensor):
        if value.dtype != dtype:
            raise RuntimeError(f"expected scalar type {_scalar_type(dtype)} but found {_scalar_type(value.dtype)}")
        return value.reshape(-1)[0].to("cpu", copy=True)
    return torch.tensor(value, dtype=torch.float64 if dtype == torch.float64 else torch.float32).to(dtype)


def _order_keys(x: torch.Tensor, nan_lowest: bool) -> torch.Tensor:
    """Integers in the order of ``x``'s values (-0.0 below +0.0), NaN below (or above) every number."""
    bits_dtype, key_dtype = KEYS[x.dtype]
    bits = x.view(bits_dtype).to(key_dtype)
    top = torch.iinfo(bits_dtype).max
    keys = torch.where(bits < 0, bits ^ top, bits)
    return keys.masked_fill_(x.isnan(), torch.iinfo(bits_dtype).min if nan_lowest else top)


def _from_order_keys(keys: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    bits_dtype = KEYS[dtype][0]
    bits = torch.where(keys < 0, keys ^ torch.iinfo(bits_dtype).max, keys).to(bits_dtype)
    values = bits.view(dtype)
    return values.masked_fill(values.isnan(), float("nan"))


def _scalar_type(dtype: torch.dtype) -> str:
    """ATen's name of a dtype (``Short``, ``ComplexFloat``), as its messages print it."""
    return torch.empty(0, dtype=dtype).type().rpartition(".")[2].removesuffix("Tensor")

