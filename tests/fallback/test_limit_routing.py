"""The engine on the simulated Mac, which refuses exactly MPS's limits (the table's exceptions, raised by its kernels
under the table's conditions): every limit whose call CUDA runs is refused without the engine and gives the CPU's
result through it, reported with the limit as the reason; user errors of the same kernels stay torch's; where the
CPU refuses too, an error names the limit; float64 asked of float32 device tensors comes back hosted."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from torchdevice.device import limits
from torchdevice.device.aten import leaves, overload, tree_map
from torchdevice.device.hosted import HostedTensor
from torchdevice.device.probes import _values
from torchdevice.device.target import Target
from torchdevice.fallback import Engine
from torchdevice.fallback import engine as engine_module
from torchdevice.fallback.cache import CapabilityCache
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import NO_FLOAT64, chosen

CPU = torch.device("cpu")
MAC_14 = (14, 0)


def Mac(macos: tuple[int, int] = MAC_14, **refusing: Any) -> SimulatedKernels:
    """The simulated Mac refusing every limit of the table on macOS ``macos`` (and what ``refusing`` adds)."""
    return SimulatedKernels(chosen(limited=limits.limited(), macos=macos, **refusing))


@contextlib.contextmanager
def completed(mac: SimulatedKernels, macos: tuple[int, int] = MAC_14) -> Iterator[Target]:
    """``mac`` entered and the engine installed on it for macOS ``macos``."""
    with mac as target:
        library = Engine(target, CapabilityCache.open(target.name), macos=macos).install()
        try:
            yield target
        finally:
            library._destroy()


def there(value: Any, device: torch.device) -> Any:
    """``value`` with its tensors on ``device`` (parameters of modules too; tensors of more dimensions than MPS
    allocates as views of one dimension, as a Mac holds them)."""
    if isinstance(value, torch.nn.Module):
        return value.to(device)
    return tree_map(lambda x: x.reshape(-1).to(device).view(x.shape) if isinstance(x, torch.Tensor) else x, value)


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
    with Mac() as target, pytest.raises(limit.raises) as refused, torch.no_grad():
        limit.op(*there(args, target.device), **there(kwargs, target.device))
    assert limit.raised(refused.value), refused.value
    reference = limit.instead or limit.op
    torch.manual_seed(0)
    with torch.no_grad():  # on copies: an in-place probe (conj_physical_) writes its arguments
        expected = reference(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    with completed(Mac()) as target, torch.no_grad():
        torch.manual_seed(0)
        got = there(limit.op(*there(args, target.device), **there(kwargs, target.device)), CPU)
    assert_same(got, expected)
    assert fallbacks[limit.op._name, "cpu"] == 1
    assert whys[limit.op._name] == limit.why


def test_the_silent_limit_gives_the_cpus_values_where_mps_would_not(fallbacks):
    x = torch.randn(1, 2, 5, 5)
    expected = F.adaptive_max_pool2d(x, 3, return_indices=True)
    with completed(Mac()) as target:
        got = there(F.adaptive_max_pool2d(x.to(target.device), 3, return_indices=True), CPU)
        divisible = F.adaptive_max_pool2d(torch.randn(1, 2, 6, 6, device=target.device), 3)
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
        "pool": lambda x, a, conv, volume: F.adaptive_avg_pool2d(x, (3, 2)),
        "inverse": lambda x, a, conv, volume: torch.linalg.inv(a),
        "solve": lambda x, a, conv, volume: torch.linalg.solve(a, a),
        "qr": lambda x, a, conv, volume: torch.linalg.qr(a),
        "statistics": lambda x, a, conv, volume: (x.sum(dtype=torch.float64), torch.softmax(x, 1, dtype=torch.float64),
                                                  torch.float_power(x, 2)),
        "conv_transpose_3d": lambda x, a, conv, volume: conv(volume),
    }
    expected = {name: program(x, a, conv, volume) for name, program in programs.items()}
    with completed(Mac(no_float64=NO_FLOAT64, hosted=True)) as target:
        inputs = [there(v, target.device) for v in (x, a, conv, volume)]
        got = {name: there(program(*inputs), CPU) for name, program in programs.items()}
        torch.manual_seed(1)
        with torch.no_grad():
            on_device = q.to(target.device)
            attention = F.scaled_dot_product_attention(on_device, on_device, on_device, dropout_p=0.3).cpu()
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

    def step(lstm: torch.nn.LSTM, inputs: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        output, _ = lstm(inputs)
        loss = output.pow(2).sum() + torch.softmax(w, 1, dtype=torch.float64)[:, 0].sum()
        loss.backward()
        assert w.grad is not None
        return (loss.detach(), w.grad.clone(), *(p.grad.clone() for p in lstm.parameters()))

    expected = step(lstm, inputs, w)
    lstm.zero_grad()
    with completed(Mac(no_float64=NO_FLOAT64, hosted=True)) as target:
        on_device = w.detach().to(target.device).requires_grad_()
        got = step(lstm.to(target.device), inputs.to(target.device), on_device)
        got = tuple(g.cpu() for g in got)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e)
    assert fallbacks["aten::lstm.input", "cpu"] == 1 and fallbacks["aten::softmax.int", "cpu"] == 1


def test_float64_asked_of_float32_device_tensors_comes_back_hosted(fallbacks):
    x = torch.randn(2, 3)
    with completed(Mac(no_float64=NO_FLOAT64, hosted=True)) as target:
        on_device = x.to(target.device)
        total = on_device.sum(dtype=torch.float64)
        probabilities = torch.softmax(on_device, 1, dtype=torch.float64)
        power = torch.float_power(on_device, 2)
    expected_values = (x.sum(dtype=torch.float64), torch.softmax(x, 1, dtype=torch.float64), torch.float_power(x, 2))
    for got, expected in zip((total, probabilities, power), expected_values, strict=True):
        assert isinstance(got, HostedTensor) and got.device == torch.device("mps", 0) and got.dtype == torch.float64
        torch.testing.assert_close(got.values_on_host(), expected)


def test_user_errors_of_limited_kernels_are_torchs_own(fallbacks):
    calls = [
        lambda device: torch.ops.aten._adaptive_avg_pool2d(torch.randn(2, 0, 4, device=device), [2, 2]),  # empty
        lambda device: torch.bmm(torch.randn(2, 3, 4, device=device), torch.randn(2, 5, 6, device=device)),  # shapes
        lambda device: torch.index_reduce(torch.zeros(3, dtype=torch.int64, device=device), 0,
                                          torch.tensor([5], device=device), torch.ones(1, dtype=torch.int64,
                                          device=device), "prod"),  # under the limit, an index out of range
    ]
    for make in calls:
        with pytest.raises(Exception) as native:
            make(CPU)
        with completed(Mac()) as target, pytest.raises(type(native.value)) as through:
            make(target.device)
        assert str(through.value) == str(native.value)  # index_reduce: under its limit, the CPU's own error


def test_a_limit_the_table_did_not_expect_is_routed_on_its_error(fallbacks):
    """The engine believes macOS 15.1 (no guard for long convolutions); the Mac runs 14.0 and refuses: the engine
    routes the call on the refusal instead."""
    x, weight = torch.randn(1, 1, 65540), torch.randn(1, 1, 3)
    with completed(Mac(macos=MAC_14), macos=(15, 1)) as target:
        got = F.conv1d(x.to(target.device), weight.to(target.device)).cpu()
    torch.testing.assert_close(got, F.conv1d(x, weight))
    assert fallbacks["aten::convolution", "cpu"] == 1


def test_newer_macos_runs_what_older_refuses_on_the_device(fallbacks):
    x, weight = torch.randn(1, 1, 65540), torch.randn(1, 1, 3)
    with completed(Mac(macos=(15, 1)), macos=(15, 1)) as target:
        F.conv1d(x.to(target.device), weight.to(target.device))
    assert fallbacks.total() == 0


def test_where_the_cpu_refuses_too_an_error_names_the_limit():
    with completed(Mac()) as target, pytest.raises(NotImplementedError) as refused:
        torch.linalg.lu_factor(torch.randn(3, 3, device=target.device), pivot=False)
    message = str(refused.value)
    assert "lu_factor_without_pivoting" in message and "LU without pivoting is not implemented on the CPU" in message
    assert "MPS doesn't allow pivot == False" in message


def test_limits_cuda_refuses_are_not_routed():
    with completed(Mac()) as target, pytest.raises(RuntimeError, match="softmax only supported for floating types"):
        torch.ops.aten._softmax(torch.randint(0, 5, (2, 3), device=target.device), 1, False)


def test_no_guard_on_the_cpu_target():
    from torchdevice.device.target import for_name

    assert Engine(for_name("cpu"), CapabilityCache.open("cpu"), macos=MAC_14).guards() == {}


def test_the_silent_limit_without_the_engine_gives_the_macs_values():
    """``adaptive_max_pool2d`` of 5x5 to 3x3: MPS pools 3x3 windows of stride 1 (one window size for the whole
    input), where the CPU's windows vary."""
    x = torch.randn(2, 3, 5, 5)
    with Mac() as target:
        mac = there(F.adaptive_max_pool2d(there(x, target.device), 3, return_indices=True), CPU)
    assert_same(mac, F.max_pool2d(x, 3, 1, return_indices=True))
    assert not torch.equal(mac[1], F.adaptive_max_pool2d(x, 3, return_indices=True)[1])
