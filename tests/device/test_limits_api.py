"""MPS's limits as the runtime reads them: each clause on real arguments (meta tensors for the sizes no test can
allocate), the Mac's exceptions word for word, the macOS version, and the table's own consistency: every probe
meets its limit, and the CPU runs (or refuses) each probe as the table says."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from torchdevice.device import limits
from torchdevice.device.aten import overload
from torchdevice.device.probes import _values

aten = torch.ops.aten
MAC_14 = (14, 0)
CPU = torch.device("cpu")
META = torch.device("meta")


def named(op: torch._ops.OpOverload, name: str) -> limits.Limit:
    (found,) = [limit for limit in limits.limits_of(op) if limit.name == name]
    return found


def meta(*sizes: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(sizes, device="meta", dtype=dtype)


def test_most_ops_have_no_limits_and_the_lookup_is_by_overload():
    assert limits.limits_of(aten.add.Tensor) == ()
    assert [lim.name for lim in limits.limits_of(aten.index_reduce.default)] == ["index_reduce_int64",
                                                                                 "index_reduce_complex"]
    assert limits.limits_of(aten.index_reduce.default) is limits.limits_of(aten.index_reduce.default)


def test_adaptive_pool_sizes():
    shrink = named(aten._adaptive_avg_pool2d.default, "adaptive_avg_pool_not_divisible")
    grow = named(aten._adaptive_avg_pool2d.default, "adaptive_avg_pool_upsampling_not_divisible")
    mixed = named(aten._adaptive_avg_pool2d.default, "adaptive_pool_mixed_sizes")
    x = torch.randn(1, 2, 6, 6)
    cases = {(3, 3): (False, False, False), (4, 3): (True, False, False), (5, 6): (True, False, False),
             (12, 12): (False, False, False), (9, 12): (False, True, False), (4, 9): (False, False, True)}
    for size, expected in cases.items():
        got = tuple(lim.applies((x, list(size)), {}, MAC_14) for lim in (shrink, grow, mixed))
        assert got == expected, size
    backward = named(aten._adaptive_avg_pool2d_backward.default, "adaptive_avg_pool_backward_not_divisible")
    assert backward.applies((torch.randn(1, 2, 4, 4), x), {}, MAC_14)  # 6 is no multiple of 4
    assert not backward.applies((torch.randn(1, 2, 3, 3), x), {}, MAC_14)


def test_dtypes_groups_and_lists():
    addr = named(aten.addr.default, "addr_integer")
    assert addr.applies((torch.ones(2, 3, dtype=torch.int64), torch.ones(2, dtype=torch.int32),
                         torch.ones(3, dtype=torch.int32)), {}, MAC_14)
    assert addr.applies((torch.ones(2, 3), torch.ones(2, dtype=torch.bool), torch.ones(3)), {}, MAC_14)
    assert not addr.applies((torch.ones(2, 3), torch.ones(2), torch.ones(3)), {}, MAC_14)
    inv = named(aten.linalg_inv_ex.default, "linalg_inv_complex")
    assert inv.applies((torch.ones(2, 2, dtype=torch.complex64),), {}, MAC_14)
    assert not inv.applies((torch.ones(2, 2),), {}, MAC_14)


def test_float64_asked_reads_the_dtype_argument_and_its_default():
    asked = named(aten.sum.dim_IntList, "float64_asked")
    x = torch.ones(2, 3)
    assert asked.applies((x, [1]), {"dtype": torch.float64}, MAC_14)
    assert asked.applies((x, [1]), {"dtype": torch.complex128}, MAC_14)
    assert not asked.applies((x, [1]), {"dtype": torch.float32}, MAC_14)
    assert not asked.applies((x, [1]), {}, MAC_14)  # left out by the dispatcher: the schema's default, None
    inside = named(aten.float_power.Tensor_Scalar, "float64_inside")
    assert inside.applies((x, 2), {}, MAC_14)  # always: float_power computes in float64


def test_a_conversion_to_float64_on_the_device_and_batch_norms_empty_input():
    converted = named(aten._to_copy.default, "float64_converted")
    x = torch.ones(2, 3)
    on_device = x.to(META)  # a device that is not the host
    assert converted.applies((on_device,), {"dtype": torch.float64}, MAC_14)  # no device: the tensor's own
    assert converted.applies((on_device,), {"dtype": torch.complex128, "device": META}, MAC_14)
    assert not converted.applies((x.to(META),), {"dtype": torch.float64, "device": CPU}, MAC_14)  # to the host
    assert not converted.applies((x,), {"dtype": torch.float64, "device": META}, MAC_14)  # a host tensor moved
    assert not converted.applies((on_device,), {"dtype": torch.float16}, MAC_14)
    statistics = named(aten.batch_norm.default, "float64_statistics")
    rest = (None, None, None, None, True, 0.1, 1e-5, False)
    assert statistics.applies((torch.ones(0, 3), *rest), {}, MAC_14)
    assert not statistics.applies((torch.ones(2, 3), *rest), {}, MAC_14)


def test_sizes_beyond_any_allocation_on_meta_tensors():
    dim = named(aten.bmm.default, "matmul_dim_above_2_32")
    tiled = named(aten.bmm.default, "matmul_above_2_32_before_macos_15")
    small = (meta(2, 3, 4), meta(2, 4, 5))
    assert not dim.applies(small, {}, MAC_14) and not tiled.applies(small, {}, MAC_14)
    wide = (meta(1, 2**33, 1), meta(1, 1, 2))
    assert dim.applies(wide, {}, MAC_14)
    many = (meta(2**12, 2**11, 8), meta(2**12, 8, 2**10))  # 2**33 outputs, every dimension small
    assert tiled.applies(many, {}, MAC_14) and not dim.applies(many, {}, MAC_14)
    assert not tiled.applies(many, {}, (15, 0))
    fill = named(aten.masked_fill_.Scalar, "masked_fill_above_2_32")
    assert fill.applies((meta(2**32 + 1), meta(2**32 + 1, dtype=torch.bool), 0.0), {}, MAC_14)
    assert not fill.applies((meta(2**32 - 1), meta(2**32 - 1, dtype=torch.bool), 0.0), {}, MAC_14)


def test_convolution_output_sizes_and_macos():
    conv = named(aten.convolution.default, "conv_output_above_65536")
    args = [meta(1, 1, 65540), meta(1, 1, 3), None, [1], [0], [1], False, [0], 1]
    assert conv.applies(args, {}, MAC_14)  # 65538 outputs
    assert conv.applies(args, {}, (15, 0)) and not conv.applies(args, {}, (15, 1))
    assert not conv.applies([meta(1, 1, 65540), meta(1, 1, 3), None, [2], [0], [1], False, [0], 1], {}, MAC_14)
    assert conv.applies([meta(1, 70000, 4, 4), meta(70000, 1, 1, 1), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1],
                        {}, MAC_14)  # 70,000 output channels
    transposed = [meta(1, 1, 65540), meta(1, 1, 3), None, [1], [0], [1], True, [0], 1]
    assert not conv.applies(transposed, {}, MAC_14)
    assert conv.possible(MAC_14) and not conv.possible((15, 1))


def test_argument_values_grad_and_lists():
    lstm = named(aten.lstm.input, "lstm_projections")
    hx = [torch.zeros(1, 1, 2), torch.zeros(1, 1, 5)]
    assert lstm.applies((torch.zeros(3, 1, 4), hx, [], True, 1, 0.0, False, False, False), {}, MAC_14)
    same = [torch.zeros(1, 1, 5), torch.zeros(1, 1, 5)]
    assert not lstm.applies((torch.zeros(3, 1, 4), same, [], True, 1, 0.0, False, False, False), {}, MAC_14)
    sdpa = named(aten.scaled_dot_product_attention.default, "sdpa_dropout_without_grad")
    q = torch.randn(1, 2, 4, 8)
    assert sdpa.applies((q, q, q, None, 0.5), {}, MAC_14)
    assert not sdpa.applies((q, q, q, None, 0.0), {}, MAC_14)
    needs_grad = q.clone().requires_grad_()
    assert not sdpa.applies((needs_grad, q, q, None, 0.5), {}, MAC_14)
    with torch.no_grad():
        assert sdpa.applies((needs_grad, q, q, None, 0.5), {}, MAC_14)
    scatter = named(aten.scatter_reduce.two, "scatter_reduce_int64_min_max_before_macos_15")
    call = (torch.zeros(3, dtype=torch.int64), 0, torch.zeros(2, dtype=torch.int64), torch.ones(2, dtype=torch.int64))
    assert scatter.applies((*call, "amax"), {}, MAC_14) and scatter.applies((*call, "amin"), {}, (14, 7))
    assert not scatter.applies((*call, "sum"), {}, MAC_14) and not scatter.applies((*call, "amax"), {}, (15, 0))
    index = named(aten.index.Tensor, "index_above_16_indices")
    x = meta(*[2] * 17)
    assert index.applies((x, [meta(1, dtype=torch.int64)] * 17), {}, MAC_14)
    assert not index.applies((x, [None, *[meta(1, dtype=torch.int64)] * 16]), {}, MAC_14)
    assert index.applies((x, [meta(2, 2, dtype=torch.bool), *[meta(1, dtype=torch.int64)] * 15]), {}, MAC_14)


def test_arguments_the_condition_cannot_read_are_no_limit():
    """A user error (the kernel reports it) is not mistaken for a limit: the condition does not apply."""
    shrink = named(aten._adaptive_avg_pool2d.default, "adaptive_avg_pool_not_divisible")
    assert not shrink.applies((torch.randn(5), [3]), {}, MAC_14)
    assert not shrink.applies((torch.randn(1, 5, 5), "three"), {}, MAC_14)


def test_exceptions_are_the_macs_word_for_word():
    shrink = named(aten._adaptive_avg_pool2d.default, "adaptive_avg_pool_not_divisible")
    exc = shrink.exception((torch.randn(1, 5, 5), [3, 3]), {})
    assert type(exc) is NotImplementedError and str(exc).startswith(
        "Adaptive pool MPS: input sizes must be divisible by output sizes. Non-divisible input sizes are not "
        "implemented on MPS device yet.")
    assert shrink.raised(exc) and not shrink.raised(RuntimeError(str(exc)))
    sdpa = named(aten._scaled_dot_product_attention_math_for_mps.default, "sdpa_integer")
    q = torch.ones(1, 1, 2, 2, dtype=torch.int64)
    assert str(sdpa.exception((q, q, q), {})) == "scaled_dot_product_attention for MPS does not support dtype Long"
    dims = named(aten.empty.memory_format, "tensor_dims_above_16")
    assert str(dims.exception(([1] * 17,), {})) == "MPS supports tensors with dimensions <= 16"
    silent = named(aten.adaptive_max_pool2d.default, "adaptive_max_pool_not_divisible")
    assert silent.raises is None
    with pytest.raises(ValueError, match="nothing is raised"):
        silent.exception((torch.randn(1, 5, 5), [3, 3]), {})


def test_generic_refusals_are_of_any_op():
    names = {lim.name for lim in limits.generic()}
    assert {"missing_kernel", "float64_tensor", "dtype_conversion"} <= names
    (missing,) = [lim for lim in limits.generic() if lim.name == "missing_kernel"]
    assert str(missing.exception((), {})).startswith("The operator 'aten::<op>' is not currently implemented for "
                                                     "the MPS device.")


def test_macos_version_from_the_environment(monkeypatch):
    monkeypatch.setenv(limits.MACOS_VARIABLE, "15.1")
    assert limits.macos() == (15, 1)
    monkeypatch.setenv(limits.MACOS_VARIABLE, "26")
    assert limits.macos() == (26, 0)
    monkeypatch.setenv(limits.MACOS_VARIABLE, "sonoma")
    monkeypatch.setattr(limits.platform, "mac_ver", lambda: ("", ("", "", ""), ""))
    assert limits.macos() == limits.DEFAULT_MACOS
    monkeypatch.delenv(limits.MACOS_VARIABLE)
    monkeypatch.setattr(limits.platform, "mac_ver", lambda: ("14.6.1", ("", "", ""), "arm64"))
    assert limits.macos() == (14, 6)


def probed_limits() -> list[limits.Limit]:
    found = []
    for row in limits.table():
        if row.probe.skip or not row.probe.op:
            continue
        op = overload(row.probe.op)
        assert op is not None, row.name
        found.append(next((lim for lim in limits.limits_of(op) if lim.name == row.name), None)
                     or limits.Limit(row, op))
    return found


@pytest.mark.parametrize("limit", probed_limits(), ids=lambda lim: lim.name)
def test_each_probe_meets_its_limit_and_the_cpu_answers_as_the_table_says(limit):
    """The table's own consistency: a probe meets its limit on the oldest macOS torch 2.13 runs on; where CUDA runs
    the call, the CPU runs it (its twin, for an MPS-only overload), unless the table says the CPU refuses it."""
    probe = limit.row.probe

    def made(device: torch.device) -> tuple[Any, dict[str, Any]]:
        args, kwargs = _values(probe.args, device), {k: _values(v, device) for k, v in probe.kwargs.items()}
        if "device" in {a.name for a in limit.op._schema.arguments}:
            kwargs.setdefault("device", device)
        return args, kwargs

    assert limit.applies(*made(META), limits.DEFAULT_MACOS)  # a device that is not the host, as the Mac's
    args, kwargs = made(CPU)
    if not limit.cuda_runs:
        return
    op = limit.instead or limit.op
    with torch.no_grad():
        if limit.row.cpu:
            with pytest.raises(RuntimeError, match=limit.row.cpu.split(":")[0]):
                op(*args, **kwargs)
        elif limit.row.routed:
            op(*args, **kwargs)
