"""Checks that need the data: an index out of range or an integer division by zero gets torch's own
exception, type and message, through the MLX route; valid calls still run on MLX.

The generated shims make the checks their overlay records name (``index_range``, ``nonzero``,
``integer_power``, ``unit_interval``); in-place calls are checked to cast into their tensor's dtype;
``unchecked`` is the same MLX call without the check.
"""

from __future__ import annotations

import mlx.core as mx
import mlx_consistency as mc
import pytest
import torch
import torch.nn.functional as F
from torchdevice_generated.mlx_shims import SHIMS

from torchdevice.fallback.mlx_bridge import arg, to_torch


def unchecked_index_select(*, self, dim, index):
    return to_torch(mx.take(arg(self), arg(index), axis=dim))


X = torch.arange(12.0).reshape(3, 4)
CASES = {
    "index_select": ("aten::index_select", SHIMS["index_select"], [
        lambda: torch.index_select(X, 0, torch.tensor([0, 7])),
        lambda: torch.index_select(X, 0, torch.tensor([-1])),
        lambda: torch.index_select(X, 1, torch.tensor([3, 4])),  # RuntimeError on this kernel path
        lambda: torch.index_select(torch.arange(5.0), 0, torch.tensor([5])),
        lambda: F.embedding(torch.tensor([[0, 9]]), torch.ones(4, 3)),
    ], [lambda: torch.index_select(X, 1, torch.tensor([3, 0])), lambda: F.embedding(torch.tensor([1, 2]), X)]),
    "take": ("aten::take", SHIMS["take"], [
        lambda: torch.take(X, torch.tensor([100])),
        lambda: torch.take(X, torch.tensor([[0], [-13]])),
        lambda: torch.take(torch.empty(0), torch.tensor([0])),
    ], [lambda: torch.take(X, torch.tensor([-12, 11, 0]))]),
    "floor_divide": ("aten::floor_divide", SHIMS["floor_divide"], [
        lambda: torch.floor_divide(torch.tensor([4, 5]), torch.tensor([2, 0])),
        lambda: torch.floor_divide(torch.tensor([4, 5], dtype=torch.uint8), torch.tensor([0, 1], dtype=torch.uint8)),
        lambda: torch.floor_divide(torch.tensor([4, 5]), 0),
    ], [lambda: torch.floor_divide(torch.tensor([4, -5]), torch.tensor([2, 3])),
        lambda: torch.floor_divide(torch.tensor([4.0, 5.0]), torch.tensor([2.0, 0.0]))]),  # float: inf, no error
    "pow": ("aten::pow.Tensor_Scalar", SHIMS["pow"], [
        lambda: torch.pow(torch.arange(1, 4), -2),
        lambda: torch.tensor([2, 3], dtype=torch.int32) ** -1,
    ], [lambda: torch.pow(torch.arange(1.0, 4.0), -2), lambda: torch.pow(torch.arange(1, 4), 2)]),
    "binary_cross_entropy": ("aten::binary_cross_entropy", SHIMS["binary_cross_entropy"], [
        lambda: F.binary_cross_entropy(torch.tensor([1.5, 0.2]), torch.tensor([1.0, 0.0])),
        lambda: F.binary_cross_entropy(torch.tensor([-0.5, 0.2]), torch.tensor([1.0, 0.0])),
        lambda: F.binary_cross_entropy(torch.tensor([float("nan"), 0.2]), torch.tensor([1.0, 0.0])),
    ], [lambda: F.binary_cross_entropy(torch.tensor([0.0, 0.2, 1.0]), torch.tensor([1.0, 0.0, 1.0]))]),
    # torch's meta kernel of mul_ does not check the cast into self's dtype; the route checks it
    "mul_": ("aten::mul_.Tensor", SHIMS["mul"], [
        lambda: torch.arange(4).mul_(1.5),
        lambda: torch.arange(4).mul_(torch.full((4,), 0.5)),
    ], [lambda: torch.arange(4.0).mul_(1.5), lambda: torch.arange(4).mul_(2)]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_failed_check_raises_torchs_exception_and_valid_calls_run_on_mlx(case, fallbacks):
    overload, shim, invalid, valid = CASES[case]
    for call in invalid:
        with pytest.raises(Exception) as native:
            call()
        with mc.mlx_route(overload, shim), pytest.raises(type(native.value)) as routed:
            call()
        assert str(routed.value) == str(native.value)
    assert fallbacks[overload, "mlx"] == 0
    for call in valid:
        with mc.mlx_route(overload, shim):
            got = call()
        torch.testing.assert_close(got, call())
    assert fallbacks[overload, "mlx"] == len(valid)


def test_without_the_check_the_route_reads_outside_the_tensor():
    # why the checks exist: MLX gathers whatever lies at an index out of range
    with mc.mlx_route("aten::index_select", unchecked_index_select):
        got = torch.index_select(X, 0, torch.tensor([0, 7]))
    assert got.shape == (2, 4) and torch.equal(got[0], X[0])
