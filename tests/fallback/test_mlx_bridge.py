"""The tensor <-> mx.array bridge: dtypes both ways, what is copied and what is shared, refusals."""

from __future__ import annotations

import mlx.core as mx
import pytest
import torch

from torchdevice.fallback import mlx_bridge as b


@pytest.mark.parametrize("dtype", list(b.TORCH_TO_MLX), ids=str)
def test_round_trip_keeps_dtype_shape_and_values(dtype):
    source = (torch.arange(-6, 6).reshape(3, 4) % 5).to(dtype)
    array = b.to_mlx(source)
    assert array.dtype == b.mlx_dtype(dtype)
    assert array.shape == tuple(source.shape)
    back = b.to_torch(array)
    assert back.dtype == dtype
    assert torch.equal(back, source)


def test_dtype_tables_are_inverse_and_name_every_mlx_dtype():
    assert {b.torch_dtype(m) for m in b.TORCH_TO_MLX.values()} == set(b.TORCH_TO_MLX)
    assert b.mlx_dtype(torch.bfloat16) == mx.bfloat16 and b.mlx_dtype(torch.float16) == mx.float16
    assert b.mlx_dtype(torch.complex64) == mx.complex64 and b.mlx_dtype(torch.bool) == mx.bool_


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_dtypes_mlx_lacks_raise_a_type_error_naming_the_dtype(dtype):
    with pytest.raises(b.MlxDtypeError, match=str(dtype)) as info:
        b.to_mlx(torch.zeros(3, dtype=dtype))
    assert isinstance(info.value, TypeError) and isinstance(info.value, b.MlxUnsupported)


def test_float64_is_narrowed_only_when_asked():
    array = b.to_mlx(torch.tensor([1.5, 2.25], dtype=torch.float64), downcast=True)
    assert array.dtype == mx.float32
    assert array.tolist() == [1.5, 2.25]
    with pytest.raises(b.MlxDtypeError):  # a cast to float32 is no licence to narrow silently
        b.to_mlx(torch.zeros(2, dtype=torch.float64), torch.float32)


def test_mlx_to_torch_shares_the_array_buffer():
    array = mx.arange(6, dtype=mx.float32) * 2
    tensor = b.to_torch(array)
    tensor[1] = -5.0
    assert array[1].item() == -5.0  # the tensor is a view of MLX's memory, not a copy


def test_torch_to_mlx_copies():
    source = torch.arange(4, dtype=torch.float32)
    array = b.to_mlx(source)
    source[0] = 100.0
    assert array[0].item() == 0.0  # MLX owns its memory: importing a CPU buffer copies it


def test_the_tensor_keeps_the_array_alive():
    tensor = b.to_torch(mx.arange(100_000, dtype=mx.float32) + 1)
    mx.eval(mx.zeros(400_000) + 3)  # would reuse a freed buffer
    assert tensor[0].item() == 1.0 and tensor[-1].item() == 100_000.0


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda a: mx.flip(a, axis=0), lambda t: torch.flip(t, (0,))),  # negative strides
        (lambda a: mx.broadcast_to(a[:1], (3, 4)), lambda t: t[:1].expand(3, 4)),  # zero strides
        (lambda a: mx.transpose(a), lambda t: t.T),
    ],
    ids=["flipped", "broadcast", "transposed"],
)
def test_mlx_views_convert_to_writable_tensors(make, expected):
    array = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    tensor = b.to_torch(make(array))
    assert torch.equal(tensor, expected(torch.arange(12.0).reshape(3, 4)))
    tensor.add_(1)  # torch refuses in-place writes into overlapping (stride 0) memory


def test_strided_conjugated_and_zero_dim_tensors_convert():
    strided = torch.arange(12.0).reshape(3, 4).T[::2]
    assert torch.equal(b.to_torch(b.to_mlx(strided)), strided)
    conj = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64).conj()
    assert torch.equal(b.to_torch(b.to_mlx(conj)), conj.resolve_conj())
    scalar = torch.tensor(2.5)
    assert b.to_torch(b.to_mlx(scalar)).shape == ()


def test_tensors_autograd_records_are_refused_unless_grad_is_off():
    leaf = torch.ones(2, requires_grad=True)
    with pytest.raises(b.MlxUnsupported, match="autograd"):
        b.to_mlx(leaf)
    with torch.no_grad():
        assert b.to_mlx(leaf).tolist() == [1.0, 1.0]


def test_result_dtype_cast_and_arg_conversion():
    assert b.to_torch(mx.array([1, 2], dtype=mx.uint32), dtype=torch.int64).dtype == torch.int64
    pair = b.arg([torch.ones(1), torch.zeros(1)])
    assert [type(a) for a in pair] == [mx.array, mx.array]
    assert b.arg(3.5) == 3.5 and b.arg((1, 2)) == (1, 2)
    assert b.device_of(2, [torch.ones(1)]) == torch.device("cpu") and b.device_of(1, None) is None


def test_dtype_families_refuse_what_was_not_verified():
    b.check_dtype("op", torch.ones(1, dtype=torch.bfloat16), ("float",))
    b.check_dtype("op", 3, ("float",))  # Python scalars pass
    with pytest.raises(b.MlxUnsupported, match="int64"):
        b.check_dtype("op", [torch.ones(1), torch.ones(1, dtype=torch.int64)], ("float",))


def test_translations_follow_torch_defaults():
    x = torch.ones(2, 3)
    assert b.translate_ddof_correction(None, x) == 1 and b.translate_ddof_correction(0, x) == 0
    with pytest.raises(b.MlxUnsupported):
        b.translate_ddof_correction(0.5, x)
    assert b.translate_axis((), x) is None and b.translate_axis(0, torch.tensor(1.0)) is None
    assert b.translate_axis((0, 1), x) == [0, 1]
    assert b.translate_repeats((2, 3), x) == (2, 3)
    with pytest.raises(b.MlxUnsupported):
        b.translate_repeats((2,), x)  # torch demands one size per dimension
    with pytest.raises(b.MlxUnsupported):
        b.translate_vector_axis(None, x)  # MLX would take a matrix norm
    assert [b.translate_reduction(r, x) for r in (0, 1, 2)] == ["none", "mean", "sum"]
    assert b.translate_zero_if_none(None, x) == 0 and b.translate_zero_if_none(2.0, x) == 2.0
