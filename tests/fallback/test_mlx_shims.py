"""The generated MLX shims on their own: refusals, dtypes, promotion, several outputs, half precision.

Shims take the schema's arguments by keyword, as the engine binds them; that the engine's MLX route
gives torch's results and errors for every mapped op is the consistency suite's business.
"""

from __future__ import annotations

import inspect

import pytest
import torch
from planned import planned
from torchdevice_generated.mlx_shims import SHIMS

from torchdevice.fallback.mlx_bridge import MlxDtypeError, MlxUnsupported


def test_every_record_has_a_shim_taking_the_schema_names():
    shims = planned().shims
    assert set(SHIMS) == {s.key for s in shims}
    for shim in shims:
        assert list(inspect.signature(SHIMS[shim.key]).parameters) == [p.name for p in shim.params], shim.key


@pytest.mark.parametrize(
    ("key", "kwargs"),
    [
        ("add", {"self": torch.ones(2), "other": torch.ones(2), "alpha": 2}),
        ("gelu", {"self": torch.ones(2), "approximate": "tanh"}),
        ("repeat", {"self": torch.ones(2, 3), "repeats": [2]}),  # fewer sizes than dimensions
        ("linalg_qr", {"A": torch.ones(2, 2), "mode": "complete"}),
    ],
)
def test_arguments_without_mlx_translation_are_refused(key, kwargs):
    with pytest.raises(MlxUnsupported):
        SHIMS[key](**kwargs)


def test_a_dtype_mlx_lacks_or_the_record_does_not_route_is_refused():
    with pytest.raises(MlxDtypeError, match="float64"):
        SHIMS["sum"](self=torch.ones(3, dtype=torch.float64))
    with pytest.raises(MlxUnsupported, match="int64"):
        SHIMS["exp"](self=torch.ones(3, dtype=torch.int64))


def test_calls_mlx_rejects_raise_unsupported_with_the_mlx_error_as_cause():
    with pytest.raises(MlxUnsupported) as info:
        SHIMS["mm"](self=torch.ones(2, 3), mat2=torch.ones(2, 3))
    assert isinstance(info.value.__cause__, ValueError)


def test_several_outputs_come_back_as_a_tuple_of_tensors():
    x = torch.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    values, indices = SHIMS["max.dim"](self=x, dim=1)
    assert values.tolist() == [5.0, 6.0] and indices.tolist() == [1, 2]
    std, mean = SHIMS["std_mean.correction"](self=x, dim=[1])
    torch.testing.assert_close((std, mean), torch.std_mean(x, 1))  # correction 1, as torch's default
    q, r = SHIMS["linalg_qr"](A=torch.tensor([[2.0, 1.0], [1.0, 3.0]]))
    torch.testing.assert_close(q @ r, torch.tensor([[2.0, 1.0], [1.0, 3.0]]))


def test_binary_operands_are_promoted_as_torch_does():
    half = torch.ones(3, dtype=torch.float16)
    result = SHIMS["add"](self=half, other=torch.tensor(2.0))  # a 0-d float32 tensor does not widen
    assert result.dtype == torch.add(half, torch.tensor(2.0)).dtype == torch.float16


def test_half_precision_reductions_accumulate_in_float32():
    ones = torch.ones(70_000, dtype=torch.float16)
    assert SHIMS["mean"](self=ones).item() == 1.0  # float16 accumulation would overflow to inf
    assert SHIMS["sum"](self=torch.full((4096,), 0.1, dtype=torch.bfloat16)).item() == pytest.approx(409.6, rel=1e-2)


def test_aten_integer_reductions_name_the_mlx_loss_reduction():
    x, y = torch.tensor([1.0, 2.0, 4.0]), torch.zeros(3)
    assert SHIMS["mse_loss"](self=x, target=y, reduction=0).tolist() == [1.0, 4.0, 16.0]  # none
    assert SHIMS["mse_loss"](self=x, target=y, reduction=2).item() == 21.0  # sum
    assert SHIMS["mse_loss"](self=x, target=y).item() == 7.0  # mean, the schema's default
