"""The engine on a Mac that refuses exactly MPS's limits (``LimitedMac``: the table's exceptions raised from kernels
under ``PrivateUse1``): every limit whose call CUDA runs is refused without the engine and gives the CPU's result
through it, reported with the limit as the reason; user errors of the same kernels stay torch's; where the CPU
refuses too, an error names the limit; float64 asked of float32 device tensors comes back hosted."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from limited_mac import LimitedMac, LimitedTarget

from torchdevice.device import limits
from torchdevice.device.aten import leaves, overload
from torchdevice.device.hosted import HostedTensor
from torchdevice.device.probes import _values
from torchdevice.fallback import Engine
from torchdevice.fallback import engine as engine_module
from torchdevice.fallback.cache import CapabilityCache

CPU = torch.device("cpu")
MAC_14 = (14, 0)


@contextlib.contextmanager
def completed(mac: LimitedMac, macos: tuple[int, int] = MAC_14) -> Iterator[LimitedTarget]:
    """``mac`` entered and the engine installed on it for macOS ``macos``."""
    with mac as target:
        library = Engine(target, CapabilityCache.open(target.name), macos=macos).install()
        try:
            yield target
        finally:
            library._destroy()


def routed_limits() -> list[limits.Limit]:
    found = []
    for row in limits.table():
        if not (row.cuda_runs and row.routed and row.raises and not row.cpu and row.probe.op and not row.probe.skip):
            continue
        op = overload(row.probe.op)
        assert op is not None
        limit = next((lim for lim in limits.limits_of(op) if lim.name == row.name), None)
        if limit is not None:
            found.append(limit)
    return found


def call(limit: limits.Limit) -> tuple[list[Any], dict[str, Any]]:
    probe = limit.row.probe
    return _values(probe.args, CPU), {k: _values(v, CPU) for k, v in probe.kwargs.items()}


def assert_same(got: Any, expected: Any) -> None:
    got_leaves, expected_leaves = leaves(got), leaves(expected)
    assert type(got) is type(expected) and len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        if isinstance(e, torch.Tensor):
            assert g.dtype == e.dtype and g.shape == e.shape
            torch.testing.assert_close(g, e, equal_nan=True)
        else:
            assert g == e


@pytest.fixture
def whys(monkeypatch) -> dict[str, str]:
    """The reason of every fallback the engine records, by op."""
    found: dict[str, str] = {}

    def record(op: str, route: str, seconds: float = 0.0, why: Any = "") -> None:
        found[op] = why() if callable(why) else why
        original(op, route, seconds, why)

    original = engine_module.record_fallback
    monkeypatch.setattr(engine_module, "record_fallback", record)
    return found


@pytest.mark.parametrize("limit", routed_limits(), ids=lambda lim: lim.name)
def test_a_limit_cuda_runs_is_refused_by_the_mac_and_runs_through_the_engine(limit, fallbacks, whys):
    args, kwargs = call(limit)
    with LimitedMac(), pytest.raises(limit.raises) as refused, torch.no_grad():
        limit.op(*args, **kwargs)
    assert limit.raised(refused.value), refused.value
    reference = limit.instead or limit.op
    torch.manual_seed(0)
    with torch.no_grad():
        expected = reference(*args, **kwargs)
    with completed(LimitedMac()), torch.no_grad():
        torch.manual_seed(0)
        got = limit.op(*args, **kwargs)
    assert_same(got, expected)
    assert fallbacks[limit.op._name, "cpu"] == 1
    assert whys[limit.op._name] == limit.why


def test_the_silent_limit_gives_the_cpus_values_where_mps_would_not(fallbacks):
    x = torch.randn(1, 2, 5, 5)
    expected = F.adaptive_max_pool2d(x, 3, return_indices=True)
    with completed(LimitedMac()):
        got = F.adaptive_max_pool2d(x, 3, return_indices=True)
        divisible = F.adaptive_max_pool2d(torch.randn(1, 2, 6, 6), 3)
    assert_same(got, expected)
    assert divisible.shape == (1, 2, 3, 3)
    assert fallbacks["aten::adaptive_max_pool2d", "cpu"] == 1  # only the call under the limit


def test_everyday_calls_under_limits_give_the_cpus_results(fallbacks):
    """What programs write: global pooling at an odd image size, attention in train mode over a frozen backbone,
    ConvTranspose3d in half precision, complex linear algebra, float64 statistics of float32 activations."""
    x = torch.randn(2, 3, 7, 7)
    q = torch.randn(2, 4, 5, 8)
    a = torch.randn(3, 3, dtype=torch.complex64) + 3 * torch.eye(3)
    conv = torch.nn.ConvTranspose3d(2, 2, 2).half()
    volume = torch.randn(1, 2, 3, 3, 3, dtype=torch.float16)
    programs = {
        "pool": lambda: F.adaptive_avg_pool2d(x, (3, 2)),
        "inverse": lambda: torch.linalg.inv(a),
        "solve": lambda: torch.linalg.solve(a, a),
        "qr": lambda: torch.linalg.qr(a),
        "statistics": lambda: (x.sum(dtype=torch.float64), torch.softmax(x, 1, dtype=torch.float64),
                               torch.float_power(x, 2)),
        "conv_transpose_3d": lambda: conv(volume),
    }
    expected = {name: program() for name, program in programs.items()}
    with completed(LimitedMac()):
        got = {name: program() for name, program in programs.items()}
        torch.manual_seed(1)
        with torch.no_grad():
            attention = F.scaled_dot_product_attention(q, q, q, dropout_p=0.3)
    torch.manual_seed(1)
    with torch.no_grad():
        torch.testing.assert_close(attention, F.scaled_dot_product_attention(q, q, q, dropout_p=0.3))
    for name in programs:
        assert_same(got[name], expected[name])
    assert fallbacks["aten::adaptive_avg_pool2d", "cpu"] == 1 and fallbacks["aten::linalg_inv", "cpu"] == 1


def test_gradients_flow_through_limited_composites_and_kernels(fallbacks):
    """An LSTM with proj_size trains, and a float64 softmax of float32 parameters back-propagates to them."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 5, proj_size=2)
    inputs, w = torch.randn(3, 1, 4), torch.randn(2, 3, requires_grad=True)

    def step() -> tuple[torch.Tensor, ...]:
        lstm.zero_grad()
        w.grad = None
        output, _ = lstm(inputs)
        loss = output.pow(2).sum() + torch.softmax(w, 1, dtype=torch.float64)[:, 0].sum()
        loss.backward()
        assert w.grad is not None
        return (loss.detach(), w.grad.clone(), *(p.grad.clone() for p in lstm.parameters()))

    expected = step()
    with completed(LimitedMac()):
        got = step()
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    assert fallbacks["aten::lstm.input", "cpu"] == 1 and fallbacks["aten::softmax.int", "cpu"] == 1


def test_float64_asked_of_float32_device_tensors_comes_back_hosted(fallbacks):
    x = torch.randn(2, 3)
    with completed(LimitedMac(hosting=True)):
        total = x.sum(dtype=torch.float64)
        probabilities = torch.softmax(x, 1, dtype=torch.float64)
        power = torch.float_power(x, 2)
    expected_values = (x.sum(dtype=torch.float64), torch.softmax(x, 1, dtype=torch.float64), torch.float_power(x, 2))
    for got, expected in zip((total, probabilities, power), expected_values, strict=True):
        assert isinstance(got, HostedTensor) and got.device == torch.device("mps", 0) and got.dtype == torch.float64
        torch.testing.assert_close(got.values_on_host(), expected)


def test_user_errors_of_limited_kernels_are_torchs_own(fallbacks):
    calls = [
        lambda: torch.ops.aten._adaptive_avg_pool2d(torch.randn(2, 0, 4), [2, 2]),  # an empty non-batch dimension
        lambda: torch.bmm(torch.randn(2, 3, 4), torch.randn(2, 5, 6)),  # shapes that do not multiply
        lambda: torch.index_reduce(torch.zeros(3, dtype=torch.int64), 0, torch.tensor([5]),
                                   torch.ones(1, dtype=torch.int64), "prod"),  # under the limit, an index out of range
    ]
    for make in calls:
        with pytest.raises(Exception) as native:
            make()
        with completed(LimitedMac()), pytest.raises(type(native.value)) as through:
            make()
        assert str(through.value) == str(native.value)  # index_reduce: under its limit, the CPU's own error


def test_a_limit_the_table_did_not_expect_is_routed_on_its_error(fallbacks):
    """The engine believes macOS 15.1 (no guard for long convolutions); the Mac runs 14.0 and refuses: the engine
    routes the call on the refusal instead."""
    x, weight = torch.randn(1, 1, 65540), torch.randn(1, 1, 3)
    with completed(LimitedMac(macos=MAC_14), macos=(15, 1)):
        got = F.conv1d(x, weight)
    torch.testing.assert_close(got, F.conv1d(x, weight))
    assert fallbacks["aten::convolution", "cpu"] == 1


def test_newer_macos_runs_what_older_refuses_on_the_device(fallbacks):
    x, weight = torch.randn(1, 1, 65540), torch.randn(1, 1, 3)
    with completed(LimitedMac(macos=(15, 1)), macos=(15, 1)):
        F.conv1d(x, weight)
    assert fallbacks.total() == 0


def test_where_the_cpu_refuses_too_an_error_names_the_limit():
    with completed(LimitedMac()), pytest.raises(NotImplementedError) as refused:
        torch.linalg.lu_factor(torch.randn(3, 3), pivot=False)
    message = str(refused.value)
    assert "lu_factor_without_pivoting" in message and "LU without pivoting is not implemented on the CPU" in message
    assert "MPS doesn't allow pivot == False" in message


def test_limits_cuda_refuses_are_not_routed():
    x = torch.randint(0, 5, (2, 3))
    with completed(LimitedMac()), pytest.raises(RuntimeError, match="softmax only supported for floating types"):
        torch.ops.aten._softmax(x, 1, False)


def test_no_guard_on_the_cpu_target():
    from torchdevice.device.target import for_name

    assert Engine(for_name("cpu"), CapabilityCache.open("cpu"), macos=MAC_14).guards() == {}
