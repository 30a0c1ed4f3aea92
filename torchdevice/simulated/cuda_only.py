"""The kernels CUDA has and the CPU lacks, for the simulated GPU: matrix products into another dtype (``out_dtype=``).

``torch.mm``, ``bmm``, ``addmm`` and ``baddbmm`` with ``out_dtype`` (``aten::mm.dtype`` and kin) have kernels for
CUDA only (``_mm_dtype_cuda`` in ATen's ``Blas.cpp``): float16 or bfloat16 inputs multiplied with float32
accumulation into a float32 result, or into the inputs' own dtype. A simulated GPU computes them as CUDA does, with
CUDA's checks and messages: the inputs converted to ``out_dtype`` (a product of two half-precision numbers is exact
in float32) and multiplied there, on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_HALF = (torch.float16, torch.bfloat16)


def _check(first: torch.Tensor, second: torch.Tensor, out_dtype: torch.dtype, out: torch.Tensor | None,
           self: torch.Tensor | None = None) -> None:
    if first.dtype != second.dtype:
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {_name(first)} and {_name(second)}")
    if out is not None and out.dtype != out_dtype:
        raise RuntimeError("out_dtype must be the same as the dtype of the provided out tensor")
    if not (out_dtype == first.dtype or (out_dtype == torch.float32 and first.dtype in _HALF)):
        raise RuntimeError("out_dtype must be the same as input dtype or fp32 for fp16/bf16 inputs")
    if self is not None and self.dtype not in (out_dtype, first.dtype):
        raise RuntimeError("self dtype must match either out_dtype or mat1 dtype")


def _name(t: torch.Tensor) -> str:
    return {torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float"}.get(t.dtype, str(t.dtype))


def _into(out: torch.Tensor | None, result: torch.Tensor) -> torch.Tensor:
    if out is None:
        return result
    out.resize_(result.shape).copy_(result)
    return out


def _product(op: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``mm.dtype``/``bmm.dtype`` and their ``out=`` forms."""
    def kernel(keyset: Any, first: torch.Tensor, second: torch.Tensor, out_dtype: torch.dtype, *,
               out: torch.Tensor | None = None) -> torch.Tensor:
        _check(first, second, out_dtype, out)
        with torch.no_grad():
            return _into(out, op(first.to(out_dtype), second.to(out_dtype)))

    return kernel


def _added(op: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``addmm.dtype``/``baddbmm.dtype`` and their ``out=`` forms."""
    def kernel(keyset: Any, self: torch.Tensor, first: torch.Tensor, second: torch.Tensor, out_dtype: torch.dtype, *,
               beta: Any = 1, alpha: Any = 1, out: torch.Tensor | None = None) -> torch.Tensor:
        _check(first, second, out_dtype, out, self)
        with torch.no_grad():
            result = op(self.to(out_dtype), first.to(out_dtype), second.to(out_dtype), beta=beta, alpha=alpha)
        return _into(out, result)

    return kernel


def kernels() -> dict[torch._ops.OpOverload, Callable[..., Any]]:
    """The kernels by overload, for the simulated GPU's ``PrivateUse1`` key."""
    aten = torch.ops.aten
    made: dict[torch._ops.OpOverload, Callable[..., Any]] = {}
    for packet, kernel in ((aten.mm, _product(torch.mm)), (aten.bmm, _product(torch.bmm)),
                           (aten.addmm, _added(torch.addmm)), (aten.baddbmm, _added(torch.baddbmm))):
        made[packet.dtype] = made[packet.dtype_out] = kernel
    return made
