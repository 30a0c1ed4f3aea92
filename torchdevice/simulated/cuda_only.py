"""The kernels CUDA has and the CPU lacks, for the simulated GPU: matrix products into another dtype (``out_dtype=``)
and the statistics of ``nn.SyncBatchNorm``.

``torch.mm``, ``bmm``, ``addmm`` and ``baddbmm`` with ``out_dtype`` (``aten::mm.dtype`` and kin) have kernels for
CUDA only (``_mm_dtype_cuda`` in ATen's ``Blas.cpp``): float16 or bfloat16 inputs multiplied with float32
accumulation into a float32 result, or into the inputs' own dtype. A simulated GPU computes them as CUDA does, with
CUDA's checks and messages: the inputs converted to ``out_dtype`` (a product of two half-precision numbers is exact
in float32) and multiplied there, on the device.

``nn.SyncBatchNorm`` (``torch/nn/modules/_functions.py``) normalizes with the statistics of every rank through kernels
CUDA has alone (``Normalization.cu``), computed here as CUDA's compute them, in the accumulation dtype (float32 for
half-precision tensors), with CUDA's checks and messages: ``batch_norm_stats`` (each channel's mean and
``1 / sqrt(var + eps)`` of its biased variance), ``batch_norm_gather_stats_with_counts`` (the ranks' statistics merged
in rank order, weighted by their counts, as CUDA's kernel merges them; the running statistics updated in place, the
variance unbiased), ``batch_norm_gather_stats`` (one count for every rank), ``batch_norm_elemt`` (the input
normalized), ``batch_norm_backward_reduce`` (each channel's sums of the output's gradient and of its product with the
centred input, and the weight's and bias's gradients) and ``batch_norm_backward_elemt`` (the input's gradient from the
sums of every rank, divided by the ranks' total count).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.device.aten import true_device
from torchdevice.device.limits import C10_NAMES

_HALF = (torch.float16, torch.bfloat16)
_FLOATING = (*_HALF, torch.float32, torch.float64)


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
    return C10_NAMES.get(t.dtype, str(t.dtype))


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


def _accumulated(kernel: str, dtype: torch.dtype) -> torch.dtype:
    """The accumulation dtype of ``dtype`` (``at::acc_type``), which CUDA's ``kernel`` dispatches on: floating dtypes
    only."""
    if dtype not in _FLOATING:
        raise RuntimeError(f'"{kernel}" not implemented for \'{C10_NAMES.get(dtype, str(dtype))}\'')
    return torch.float32 if dtype in _HALF else dtype


def _expect(t: torch.Tensor | None, dtype: torch.dtype, name: str) -> None:
    """CUDA's check of an argument's dtype as its kernel reads it (``get_packed_accessor``)."""
    if t is not None and t.dtype != dtype:
        raise RuntimeError(f"Expected {name} to have type {C10_NAMES[dtype]} but got {_name(t)}")


def _same_stats_dtypes(mean: torch.Tensor, invstd: torch.Tensor) -> None:
    if mean.dtype != invstd.dtype:
        raise RuntimeError("mean and invstd need to have the same data types")


def _channels(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A vector of one value per channel, viewed to broadcast along dimension 1 of ``like``."""
    return t.view(1, -1, *[1] * (like.dim() - 2))


def _reduced(t: torch.Tensor) -> list[int]:
    """The dimensions a channel's statistics reduce: all but dimension 1."""
    return [0, *range(2, t.dim())]


def _stats(keyset: Any, input: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    acc = _accumulated("batch_norm_stats_cuda", input.dtype)
    with torch.no_grad():
        var, mean = torch.var_mean(input.to(acc), _reduced(input), correction=0)
        invstd = (var + eps).sqrt().reciprocal()
        return mean, invstd if eps else invstd.masked_fill(var == 0, 0)  # CUDA's InvStd: 0 for var == eps == 0


def _gather_stats_with_counts(keyset: Any, input: torch.Tensor, mean: torch.Tensor, invstd: torch.Tensor,
                              running_mean: torch.Tensor | None, running_var: torch.Tensor | None, momentum: float,
                              eps: float, counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    op = "batch_norm_gather_stats_with_counts"
    if mean.dim() != 2:
        raise RuntimeError(f"{op}: expected mean to be 2-dimensional (world_size, num_features), but got mean of "
                           f"sizes {list(mean.shape)}")
    if invstd.shape != mean.shape:
        raise RuntimeError(f"{op}: expected invstd to have the same shape as mean ({list(mean.shape)}), but got "
                           f"invstd of sizes {list(invstd.shape)}")
    if counts.numel() < mean.size(0):
        raise RuntimeError(f"{op}: expected counts to have at least one element per entry in mean's first dimension "
                           f"({mean.size(0)}), but got {counts.numel()} elements")
    scalar = (running_mean if running_mean is not None else input).dtype
    acc = _accumulated("batch_norm_update_stats_cuda", scalar)
    for t, name in ((mean, "mean"), (invstd, "invstd")):
        _expect(t, acc, name)
    for maybe, name in ((running_mean, "running_mean"), (running_var, "running_mean"), (counts, "counts")):
        _expect(maybe, scalar, name)  # running_var named so by CUDA's check
    with torch.no_grad():
        avg = torch.zeros(mean.size(1), dtype=acc, device=true_device(mean))
        var_n, n = torch.zeros_like(avg), 0
        for m, s, count in zip(mean, invstd, counts[:mean.size(0)].tolist(), strict=True):  # in rank order
            factor = 1.0 / (n + count) if n + count else math.inf
            var_n += (s.reciprocal().square() - eps) * count + (avg - m).square() * n * count * factor
            avg = avg * (n * factor) + m * (count * factor)
            n = int(n + count)  # an integer count, as the kernel's
        if running_mean is not None:
            running_mean.copy_(running_mean.to(acc) * (1 - momentum) + avg * momentum)
        if running_var is not None:
            running_var.copy_(running_var.to(acc) * (1 - momentum) + var_n / (n - 1) * momentum)
        return avg, (var_n / n + eps).sqrt().reciprocal()


def _gather_stats(keyset: Any, input: torch.Tensor, mean: torch.Tensor, invstd: torch.Tensor,
                  running_mean: torch.Tensor | None, running_var: torch.Tensor | None, momentum: float, eps: float,
                  count: int) -> tuple[torch.Tensor, torch.Tensor]:
    if mean.dim() != 2:
        raise RuntimeError(f"batch_norm_gather_stats: expected mean to be 2-dimensional (world_size, num_features), "
                           f"but got mean of sizes {list(mean.shape)}")
    counts = torch.full((mean.size(0),), count, device=true_device(input),
                        dtype=(running_mean if running_mean is not None else input).dtype)
    return _gather_stats_with_counts(keyset, input, mean, invstd, running_mean, running_var, momentum, eps, counts)


def _elemt(keyset: Any, input: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
           mean: torch.Tensor, invstd: torch.Tensor, eps: float, *, out: torch.Tensor | None = None) -> torch.Tensor:
    acc = _accumulated("batch_norm_elementwise_cuda", input.dtype)
    with torch.no_grad():
        normalized = (input.to(acc) - _channels(mean, input)) * _channels(invstd, input)
        if weight is not None:
            normalized = normalized * _channels(weight, input)
        if bias is not None:
            normalized = normalized + _channels(bias, input)
        return _into(out, normalized.to(input.dtype))


def _backward_reduce(keyset: Any, grad_out: torch.Tensor, input: torch.Tensor, mean: torch.Tensor,
                     invstd: torch.Tensor, weight: torch.Tensor | None, input_g: bool, weight_g: bool,
                     bias_g: bool) -> tuple[torch.Tensor | None, ...]:
    acc = _accumulated("batch_norm_backward_reduce", grad_out.dtype)
    _same_stats_dtypes(mean, invstd)
    with torch.no_grad():
        dy = grad_out.to(acc)
        sum_dy = dy.sum(_reduced(input))
        sum_dy_xmu = (dy * (input.to(acc) - _channels(mean, input))).sum(_reduced(input))
        grads = weight.dtype if weight is not None else torch.get_default_dtype()
        return (sum_dy.to(mean.dtype) if input_g else None, sum_dy_xmu.to(mean.dtype) if input_g else None,
                (sum_dy_xmu * invstd).to(grads) if weight_g else None, sum_dy.to(grads) if bias_g else None)


def _backward_elemt(keyset: Any, grad_out: torch.Tensor, input: torch.Tensor, mean: torch.Tensor,
                    invstd: torch.Tensor, weight: torch.Tensor | None, sum_dy: torch.Tensor,
                    sum_dy_xmu: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    acc = _accumulated("batch_norm_backward_elemt", grad_out.dtype)
    _same_stats_dtypes(mean, invstd)
    with torch.no_grad():
        total = int(count.sum().item())  # every rank's elements
        norm = 1.0 / total if total else math.inf
        projection = invstd.square() * sum_dy_xmu * norm
        scale = invstd * weight if weight is not None else invstd
        grad_in = (grad_out.to(acc) - _channels(sum_dy * norm, input)
                   - (input.to(acc) - _channels(mean, input)) * _channels(projection, input)) * _channels(scale, input)
        return grad_in.to(grad_out.dtype)


def kernels() -> dict[torch._ops.OpOverload, Callable[..., Any]]:
    """The kernels by overload, for the simulated GPU's ``PrivateUse1`` key."""
    aten = torch.ops.aten
    made: dict[torch._ops.OpOverload, Callable[..., Any]] = {}
    for packet, kernel in ((aten.mm, _product(torch.mm)), (aten.bmm, _product(torch.bmm)),
                           (aten.addmm, _added(torch.addmm)), (aten.baddbmm, _added(torch.baddbmm))):
        made[packet.dtype] = made[packet.dtype_out] = kernel
    made[aten.batch_norm_elemt.default] = made[aten.batch_norm_elemt.out] = _elemt
    made.update({aten.batch_norm_stats.default: _stats, aten.batch_norm_gather_stats.default: _gather_stats,
                 aten.batch_norm_gather_stats_with_counts.default: _gather_stats_with_counts,
                 aten.batch_norm_backward_reduce.default: _backward_reduce,
                 aten.batch_norm_backward_elemt.default: _backward_elemt})
    return made
