"""torch validates, MLX computes: the meta check before the MLX call and the result held to it."""

from __future__ import annotations

import logging

import mlx_consistency as mc
import pytest
import torch
from torchdevice_generated.mlx_shims import SHIMS

from torchdevice.fallback import validate
from torchdevice.fallback.validate import Rejected, ResultMismatch, Unverifiable


def test_meta_outputs_give_torchs_shapes_and_dtypes_without_computing():
    x = torch.randn(3, 4)
    values, indices = validate.meta_outputs(torch.ops.aten.max.dim, (x, 1), {})
    assert (values.device.type, values.shape, values.dtype) == ("meta", (3,), torch.float32)
    assert (indices.shape, indices.dtype) == ((3,), torch.int64)
    half = torch.ones(3, dtype=torch.float16)
    assert validate.meta_outputs(torch.ops.aten.add.Tensor, (half, 2.5), {}).dtype == torch.float16  # wrapped number
    cat = validate.meta_outputs(torch.ops.aten.cat.default, ([x, x.int()],), {})  # a list of tensors
    assert (cat.shape, cat.dtype) == ((6, 4), torch.float32)
    assert validate.meta_outputs(torch.ops.aten.sum.dim_IntList, (x.bool(), [1]), {"dtype": torch.bool}).dtype == \
        torch.bool


@pytest.mark.parametrize(("op", "args", "kwargs"), [
    (torch.ops.aten.dot.default, (torch.ones(3, 4), torch.ones(3, 4)), {}),
    (torch.ops.aten.mean.dim, (torch.ones(3, 4), []), {"dtype": torch.int64}),
    (torch.ops.aten.add_.Tensor, (torch.ones(3), torch.ones(2, 3)), {}),  # in place, would broadcast self
    (torch.ops.aten.softshrink.default, (torch.ones(3), -0.5), {}),
])
def test_a_call_torch_rejects_raises_torchs_exception_and_is_refused_to_the_route(op, args, kwargs):
    with pytest.raises(Exception) as native:
        op(*args, **kwargs)
    with pytest.raises(Exception) as meta:
        validate.meta_outputs(op, args, kwargs)
    # the meta kernel's type or, where torch 2.15's CPU kernel is more specific (NotImplementedError), its base
    assert isinstance(native.value, type(meta.value))
    with pytest.raises(Rejected) as refused:
        validate.expect(op, args, kwargs)
    assert type(refused.value.__cause__) is type(meta.value)


def test_ops_without_a_meta_kernel_are_unverifiable():
    assert not validate.checkable(torch.ops.aten.equal.default)  # no meta kernel at all
    assert not validate.checkable(torch.ops.aten.allclose.default)  # a composite that calls item()
    assert validate.checkable(torch.ops.aten.add.Tensor) and validate.checkable(torch.ops.aten.linalg_qr.default)
    with pytest.raises(Unverifiable):
        validate.meta_outputs(torch.ops.aten.equal.default, (torch.ones(2), torch.ones(2)), {})
    with pytest.raises(Unverifiable):  # torch checks sparse tensors in their own kernels
        validate.meta_outputs(torch.ops.aten.add.Tensor, (torch.ones(2).to_sparse(), torch.ones(2)), {})
    with pytest.raises(Unverifiable):  # tensors on two devices: torch's kernel raises its error
        validate.meta_outputs(torch.ops.aten.add.Tensor, (torch.ones(2), torch.ones(2, device="meta")), {})


def test_a_routed_op_without_a_meta_kernel_runs_on_torchs_kernel(fallbacks):
    x = torch.randn(4)
    with mc.mlx_route("aten::equal", lambda **kwargs: True):  # a shim that would say "equal" to anything
        assert torch.equal(x, x.clone()) and not torch.equal(x, x + 1)
    assert fallbacks["aten::equal", "mlx"] == 0


def test_conform_casts_to_torchs_dtype_and_refuses_another_shape(caplog):
    expected = validate.meta_outputs(torch.ops.aten.max.dim, (torch.ones(2, 3), 1), {})
    values, indices = validate.conform("aten::max.dim", (torch.ones(2), torch.zeros(2, dtype=torch.int32)), expected)
    assert (values.dtype, indices.dtype) == (torch.float32, torch.int64)
    before = validate.mismatches["aten::max.dim"]
    with caplog.at_level(logging.WARNING, "torchdevice.fallback"), pytest.raises(ResultMismatch, match="shape"):
        validate.conform("aten::max.dim", (torch.ones(3), torch.zeros(3)), expected)
    with pytest.raises(ResultMismatch, match="2 results"):
        validate.conform("aten::max.dim", torch.ones(2), expected)
    assert validate.mismatches["aten::max.dim"] == before + 2
    assert len(caplog.records) == (0 if before else 1)  # logged once per op


def test_a_shim_result_of_the_wrong_shape_is_not_used(fallbacks):
    def transposes(**kwargs):
        return SHIMS["sum"](**kwargs).t()  # a mapping bug

    x = torch.randn(2, 3, 4)
    with mc.mlx_route("aten::sum.dim_IntList", transposes):
        got = x.sum(2)
    torch.testing.assert_close(got, x.sum(2))  # torch's kernel computed it
    assert fallbacks["aten::sum.dim_IntList", "mlx"] == 0


def test_a_shim_result_of_another_dtype_gets_torchs(fallbacks):
    def in_float16(*, self, other, alpha=1):
        return SHIMS["add"](self=self.half(), other=other.half())

    x, y = torch.randn(5), torch.randn(5)
    with mc.mlx_route("aten::add.Tensor", in_float16):
        got = x + y
    assert got.dtype == torch.float32 and fallbacks["aten::add.Tensor", "mlx"] == 1
    torch.testing.assert_close(got, x + y, rtol=1e-3, atol=1e-3)  # computed in float16


def test_an_in_place_call_of_a_functional_shim_writes_its_argument(fallbacks):
    x = torch.tensor([-1.0, 2.0, -3.0])
    with mc.mlx_route("aten::relu_", SHIMS["relu"]):  # returns a new tensor
        y = torch.relu_(x)
    assert y is x and x.tolist() == [0.0, 2.0, 0.0]
    assert fallbacks["aten::relu_", "mlx"] == 1


def test_meta_results_are_remembered_per_call_signature():
    ints = torch.arange(4)
    first = validate.meta_outputs(torch.ops.aten.add.Tensor, (ints, 1), {})
    assert validate.meta_outputs(torch.ops.aten.add.Tensor, (ints.clone(), 1), {}) is first
    assert first.dtype == torch.int64
    assert validate.meta_outputs(torch.ops.aten.add.Tensor, (ints, 1.0), {}).dtype == torch.float32  # 1 == 1.0
    assert validate.meta_outputs(torch.ops.aten.add.Tensor, (ints.view(2, 2), 1), {}).shape == (2, 2)
    assert validate.meta_outputs(torch.ops.aten.add.Tensor, (ints[::2], 1), {}).shape == (2,)
    with pytest.raises(RuntimeError):  # an error is torch's on every call, not remembered as a result
        validate.meta_outputs(torch.ops.aten.mm.default, (torch.ones(2, 3), torch.ones(2, 3)), {})


def test_an_argument_written_that_overlaps_another_is_left_to_torch(fallbacks):
    x = torch.arange(6.0)
    with pytest.raises(Unverifiable):
        validate.meta_outputs(torch.ops.aten.add_.Tensor, (x[1:], x[:-1]), {})
    assert validate.meta_outputs(torch.ops.aten.add_.Tensor, (x, x), {}).shape == (6,)  # the same tensor: fine
    with mc.mlx_route("aten::add_.Tensor"), pytest.raises(RuntimeError, match="single memory location"):
        x[1:].add_(x[:-1])
    assert fallbacks["aten::add_.Tensor", "mlx"] == 0
