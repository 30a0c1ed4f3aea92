"""The generated MLX shims beyond value equality: refusals, result types, in-place writes, signatures."""

from __future__ import annotations

import inspect

import pytest
import torch
from torchdevice_generated.mlx_shims import SHIMS

from codegen.load import load
from codegen.plan import plan
from torchdevice.fallback.mlx_bridge import MlxDtypeError, MlxUnsupported


def test_every_mapping_has_a_shim_with_the_torch_parameters():
    shims = plan(load()).shims
    assert set(SHIMS) == {s.name for s in shims}
    for shim in shims:
        assert list(inspect.signature(SHIMS[shim.name]).parameters) == [p.name for p in shim.params], shim.name


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("torch.add", (torch.ones(2), torch.ones(2)), {"alpha": 2}),
        ("torch.add", (torch.ones(2), torch.ones(2)), {"out": torch.empty(2)}),
        ("torch.div", (torch.ones(2), torch.ones(2)), {"rounding_mode": "floor"}),
        ("torch.nn.functional.gelu", (torch.ones(2),), {"approximate": "tanh"}),
        ("torch.sum", (torch.ones(2, 3), 1), {"dtype": torch.float64}),
        ("torch.nn.functional.softmax", (torch.ones(2, 3),), {}),  # implicit dim
        ("torch.Tensor.repeat", (torch.ones(2, 3), 2), {}),  # fewer sizes than dimensions
    ],
)
def test_arguments_without_mlx_translation_are_refused(name, args, kwargs):
    with pytest.raises(MlxUnsupported):
        SHIMS[name](*args, **kwargs)


def test_unsupported_dtype_is_refused_with_a_type_error():
    with pytest.raises(MlxDtypeError, match="float64"):
        SHIMS["torch.sum"](torch.ones(3, dtype=torch.float64), 0)
    with pytest.raises(MlxUnsupported, match="int64"):  # exp of integers was not verified
        SHIMS["torch.exp"](torch.ones(3, dtype=torch.int64))


def test_calls_mlx_rejects_raise_unsupported_with_the_mlx_error_as_cause():
    with pytest.raises(MlxUnsupported) as info:
        SHIMS["torch.matmul"](torch.ones(2, 3), torch.ones(2, 3))
    assert isinstance(info.value.__cause__, ValueError)


def test_results_keep_torch_types_and_dtypes():
    x = torch.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    result = SHIMS["torch.max"](x, 1)
    assert type(result) is torch.return_types.max
    assert result.values.tolist() == [5.0, 6.0] and result.indices.dtype == torch.int64
    assert result.indices.tolist() == [1, 2]
    assert type(SHIMS["torch.sort"](x)) is torch.return_types.sort
    assert SHIMS["torch.allclose"](x, x) is True
    std, mean = SHIMS["torch.std_mean"](x, 1)
    torch.testing.assert_close((std, mean), torch.std_mean(x, 1))  # correction=1 by default, like torch
    assert SHIMS["torch.sum"](torch.ones(3, dtype=torch.int32), 0).dtype == torch.int64  # as torch.sum
    assert SHIMS["torch.argmax"](x).dtype == torch.int64


def test_binary_operands_are_promoted_as_torch_does():
    half = torch.ones(3, dtype=torch.float16)
    result = SHIMS["torch.add"](half, torch.tensor(2.0))  # a 0-d float32 tensor does not widen
    assert result.dtype == torch.add(half, torch.tensor(2.0)).dtype == torch.float16


def test_in_place_variants_write_into_and_return_their_input():
    x = torch.tensor([1.0, 2.0])
    assert SHIMS["torch.Tensor.add_"](x, torch.tensor([10.0, 20.0])) is x
    assert x.tolist() == [11.0, 22.0]
    y = torch.tensor([0.5, -0.5])
    assert SHIMS["torch.relu_"](y) is y and y.tolist() == [0.5, 0.0]
    ints = torch.tensor([1, 2])
    with pytest.raises(MlxUnsupported):  # true division cannot be written into an integer tensor
        SHIMS["torch.Tensor.div_"](ints, ints)
    assert ints.tolist() == [1, 2]


def test_the_per_op_check_catches_a_wrong_mapping_and_a_shim_that_never_runs():
    import mlx_samples

    spec = {"opinfo": ("sin",), "recipe": None, "dtypes": ("float32",), "tolerance": None, "inplace": False}
    mlx_samples.check(SHIMS["torch.sin"], torch.sin, **spec)
    with pytest.raises(AssertionError, match="not close"):
        mlx_samples.check(SHIMS["torch.sin"], torch.cos, **spec)
    with pytest.raises(AssertionError, match="no int64 sample ran"):  # exp refuses integers
        mlx_samples.check(SHIMS["torch.exp"], torch.exp, **{**spec, "opinfo": ("bitwise_not",), "dtypes": ("int64",)})
