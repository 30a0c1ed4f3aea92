"""The engine on a simulated MPS target: routing, verdicts, result types, user errors, zero overhead. The target's
tensors are the simulated device's (``on(target, ...)`` copies inputs there, ``host(...)`` results back)."""

from __future__ import annotations

import contextlib
import traceback

import mlx_consistency
import pytest
import torch
from fallback_support import activated, engine, host, on, registered
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from torch.utils import _pytree as pytree
from torchdevice_generated.mlx_shims import SHIMS

from torchdevice.cli import catalog
from torchdevice.device.target import Target, for_name
from torchdevice.fallback import Engine, activate
from torchdevice.fallback.cache import ANY, CapabilityCache
from torchdevice.fallback.mlx_bridge import MlxUnsupported
from torchdevice.patching import Patcher
from torchdevice.records import dispatcher_name
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import CHOSEN, chosen

TORCH_DIR = torch.__file__.rpartition("/")[0]


def test_missing_op_runs_on_cpu_without_trying_the_target(fallbacks):
    from torchdevice_generated.fallback_table import MLX_ROUTES

    assert "aten::cummax" not in MLX_ROUTES  # no MLX route: the CPU runs it
    sim = SimulatedKernels(chosen(missing={"cummax"}, table_missing={"aten::cummax"}))
    x = torch.randn(6)
    with activated(sim) as target:
        d = on(target, x)
        results = [torch.cummax(d, 0), d.cummax(0), torch.ops.aten.cummax(d, 0)]
        assert type(results[0]) is torch.return_types.cummax
        results = host(results)
    for r in results:
        torch.testing.assert_close(tuple(r), tuple(torch.cummax(x, 0)))
    assert sim.attempts["cummax"] == 0
    assert fallbacks["aten::cummax", "cpu"] == 3


def test_missing_op_with_verified_mlx_mapping_runs_on_mlx(fallbacks):
    from torchdevice_generated.fallback_table import MLX_ROUTES

    assert "aten::cumsum" in MLX_ROUTES
    sim = SimulatedKernels(chosen(missing={"cumsum"}, table_missing={"aten::cumsum"}))
    x = torch.randn(6)
    with activated(sim) as target:
        d = on(target, x)
        results = host([torch.cumsum(d, 0), d.cumsum(0)])
    for r in results:
        torch.testing.assert_close(r, torch.cumsum(x, 0))
    assert sim.attempts["cumsum"] == 0
    assert fallbacks["aten::cumsum", "mlx"] == 2 and fallbacks["aten::cumsum", "cpu"] == 0


def test_failure_learned_once_then_not_retried(fallbacks, cache_dir):
    sim = SimulatedKernels(chosen(float64_ops={"erfinv"}, try_first={"aten::erfinv"}))
    x = torch.rand(5, dtype=torch.float64)
    with activated(sim) as target:
        d = on(target, x)  # this table refuses float64 in erfinv alone: the device holds it
        first, second = host(torch.erfinv(d)), host(torch.erfinv(d))
        assert sim.attempts["erfinv"] == 1  # float64 tried once, then known to fail
        single = host(torch.erfinv(d.float()))
        torch.erfinv(d.float())
        assert sim.attempts["erfinv"] == 3  # float32 works there: tried every time, never falls back
    torch.testing.assert_close(first, torch.erfinv(x))
    torch.testing.assert_close(second, torch.erfinv(x))
    torch.testing.assert_close(single, torch.erfinv(x.float()))
    assert fallbacks["aten::erfinv", "cpu"] == 2
    assert CapabilityCache.open(CHOSEN).learned() == {"aten::erfinv": {"float64": "dtype"}}


def test_learned_verdict_persists_for_the_next_activation(fallbacks):
    x = torch.rand(5, dtype=torch.float64)
    with activated(SimulatedKernels(chosen(float64_ops={"erfinv"}, try_first={"aten::erfinv"}))) as target:
        torch.erfinv(on(target, x))
    # a later run whose table does not name erfinv: the persisted verdict registers and routes it
    later = SimulatedKernels(chosen(float64_ops={"erfinv"}))
    expected = torch.erfinv(x)
    with activated(later) as target:
        assert registered("aten::erfinv")
        torch.testing.assert_close(host(torch.erfinv(on(target, x))), expected)
    assert later.attempts["erfinv"] == 0
    assert fallbacks["aten::erfinv", "cpu"] == 2


def test_missing_kernel_learned_for_every_dtype():
    sim = SimulatedKernels(chosen(missing={"erfinv"}, try_first={"aten::erfinv"}))
    with activated(sim) as target:
        for dtype in (torch.float32, torch.float64, torch.float16):
            torch.erfinv(on(target, torch.rand(3, dtype=dtype)))
        assert CapabilityCache.open(target.name).learned() == {"aten::erfinv": {ANY: "kernel"}}
    assert sim.attempts["erfinv"] == 1


def test_verified_mlx_shim_runs_a_missing_op(fallbacks):
    sim = SimulatedKernels(chosen(missing={"exp"}, table_missing={"aten::exp"}))
    x = torch.randn(8)
    with engine(sim, {"aten::exp": SHIMS["exp"]}) as e:
        d = on(e.target, x)
        y = host(torch.exp(d))
        z = host(torch.exp(d.double()))  # MLX has no float64: the shim refuses, the CPU runs it
    torch.testing.assert_close(y, torch.exp(x))
    torch.testing.assert_close(z, torch.exp(x.double()))
    assert (fallbacks["aten::exp", "mlx"], fallbacks["aten::exp", "cpu"]) == (1, 1)
    assert sim.attempts["exp"] == 0


def test_prefer_mlx_sends_supported_ops_to_mlx(fallbacks):
    sim = SimulatedKernels(chosen(float64_ops={"add"}))  # add works on the target; attempts are counted
    a, b = torch.randn(4), torch.randn(4)
    with engine(sim, {"aten::add.Tensor": SHIMS["add"]}, prefer_mlx=True) as e:
        da, db = on(e.target, (a, b))
        y = host(torch.add(da, db))
        scaled = host(torch.add(da, db, alpha=2))  # alpha has no MLX translation: the target runs it
    torch.testing.assert_close(y, a + b)
    torch.testing.assert_close(scaled, a + 2 * b)
    assert fallbacks["aten::add.Tensor", "mlx"] == 1
    assert sim.attempts["add"] == 1


def test_inplace_through_mlx_keeps_the_callers_tensor(fallbacks):
    sim = SimulatedKernels(chosen(missing={"add_"}, table_missing={"aten::add_.Tensor"}))
    x, other = torch.randn(5), torch.randn(5)
    expected = x + other
    with engine(sim, {"aten::add_.Tensor": SHIMS["add"]}) as e:
        d, other = on(e.target, (x, other))
        y = d.add_(other)
        assert y is d
        torch.testing.assert_close(host(d), expected)
    assert fallbacks["aten::add_.Tensor", "mlx"] == 1


def test_result_types_are_kept():
    ops = {"sort", "topk", "max", "_pack_padded_sequence", "_pad_packed_sequence", "cat", "_foreach_mul"}
    table = {"aten::sort", "aten::topk", "aten::max.dim", "aten::_pack_padded_sequence",
             "aten::_pad_packed_sequence", "aten::cat", "aten::_foreach_mul.Scalar"}
    x = torch.randn(4, 5)
    seqs, lengths = torch.randn(3, 4, 2), torch.tensor([4, 2, 1])

    def program():
        packed = pack_padded_sequence(seqs, lengths, batch_first=True)
        return {
            "sort": torch.sort(x, dim=1),
            "topk": x.topk(2),
            "max": torch.max(x, 1),
            "packed": packed,
            "padded": pad_packed_sequence(packed, batch_first=True),
            "nested": [torch.cat([x, x]), (torch._foreach_mul([x, x], 2.0),)],
        }

    expected = program()
    sim = SimulatedKernels(chosen(missing=ops, table_missing=table))
    with activated(sim) as target:
        x, seqs = on(target, (x, seqs))  # the lengths of a packed sequence stay a host tensor on every device
        got = program()
        assert type(got["max"]) is torch.return_types.max and type(got["packed"]) is PackedSequence
        got = host(got)
    assert all(sim.attempts[op] == 0 for op in ops)
    # every container type, return_types and PackedSequence included, is the native one
    assert pytree.tree_structure(got) == pytree.tree_structure(expected)
    assert type(got["max"]) is torch.return_types.max and type(got["packed"]) is PackedSequence
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("mode", [contextlib.nullcontext, torch.inference_mode], ids=["autograd", "inference"])
def test_inplace_and_out_update_the_callers_tensors(fallbacks, mode):
    def program(x, idx, src, a, b, out):
        with mode():
            results = (torch.cumsum(x, 0, out=out), x.cumsum_(0), x.index_add_(0, idx, src),
                       torch._foreach_add_([a, b], 1.0))
        aliases = (results[0] is out, results[1] is x, results[2] is x, [r is t for r in results[3] for t in (a, b)])
        return (x, a, b, out), aliases

    x, idx, src = torch.randn(4, 3), torch.tensor([0, 2]), torch.randn(2, 3)
    inputs = (x, idx, src, torch.randn(3), torch.randn(3), torch.empty(0))
    expected = program(*(t.clone() for t in inputs))
    table = {"aten::cumsum_", "aten::cumsum.out", "aten::index_add_", "aten::_foreach_add_.Scalar"}
    sim = SimulatedKernels(chosen(missing={"cumsum_", "cumsum", "index_add_", "_foreach_add_"}, table_missing=table))
    with activated(sim) as target:
        got = program(*on(target, inputs))
        got = (host(got[0]), got[1])
    assert got[1] == expected[1] and got[1][:3] == (True, True, True)
    torch.testing.assert_close(got[0], expected[0])  # out= resized from empty, as natively
    assert fallbacks.total() == 4


def test_gradients_flow_back_through_the_cpu_route():
    def loss(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        values, _ = torch.sort(torch.cumsum(w * x, 1), dim=1)
        return values.logsumexp(1).sum()

    x = torch.randn(3, 5)
    w_native = torch.randn(3, 5, requires_grad=True)
    loss(w_native, x).backward()
    sim = SimulatedKernels(chosen(missing={"cumsum", "sort"}, table_missing={"aten::cumsum", "aten::sort"}))
    with activated(sim) as target:
        w = on(target, w_native.detach()).requires_grad_()
        loss(w, on(target, x)).backward()
        torch.testing.assert_close(host(w.grad), w_native.grad)


def test_user_error_of_the_target_propagates_unchanged(fallbacks):
    sim = SimulatedKernels(chosen(float64_ops={"index_select"}, try_first={"aten::index_select"}))
    with activated(sim) as target, pytest.raises(RuntimeError, match="Expected dtype int32 or int64") as info:
        torch.index_select(on(target, torch.randn(3)), 0, on(target, torch.tensor([0.0])))
    assert sim.attempts["index_select"] == 1
    assert info.value is sim.raised[-1]  # the object the target's kernel raised
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert traceback.extract_tb(info.value.__traceback__)[-1].filename.startswith(TORCH_DIR)
    assert fallbacks.total() == 0
    assert CapabilityCache.open(target.name).learned() == {}


def test_user_error_on_the_cpu_route_is_torchs_own():
    sim = SimulatedKernels(chosen(missing={"cumsum"}, table_missing={"aten::cumsum"}))
    with pytest.raises(IndexError) as native:
        torch.cumsum(torch.ones(2), 3)
    with activated(sim) as target, pytest.raises(IndexError) as routed:
        torch.cumsum(on(target, torch.ones(2)), 3)
    assert str(routed.value) == str(native.value)
    assert traceback.extract_tb(routed.value.__traceback__)[-1].filename.startswith(TORCH_DIR)


def test_supported_ops_are_not_touched():
    attributes = {name: getattr(torch, name) for name in ("add", "cumsum", "sort")}
    methods = {name: vars(torch.Tensor).get(name) for name in ("add", "cumsum", "__add__")}
    sim = SimulatedKernels(chosen(missing={"cumsum"}, table_missing={"aten::cumsum"}))
    with sim as target:
        patcher = Patcher()
        activate(patcher, target, {})
        assert registered("aten::cumsum") and not registered("aten::add.Tensor") and not registered("aten::sort")
        assert {name: getattr(torch, name) for name in attributes} == attributes
        assert {name: vars(torch.Tensor).get(name) for name in methods} == methods
        assert len(patcher) == 1  # the library holding the registrations, nothing else
        patcher.restore()
        assert not registered("aten::cumsum")
        with pytest.raises(NotImplementedError, match="not currently implemented for the MPS device"):
            torch.cumsum(torch.ones(3, device=target.device), 0)


def test_cpu_target_without_prefer_mlx_changes_nothing():
    patcher = Patcher()
    activate(patcher, for_name("cpu"), {"prefer_mlx": False})
    assert len(patcher) == 0


def test_mlx_refusal_is_the_bridge_exception():
    # the contract the engine relies on: a shim refuses arguments with MlxUnsupported, before any work
    with pytest.raises(MlxUnsupported):
        SHIMS["add"](self=torch.ones(2), other=torch.ones(2), alpha=3)



def test_prefer_mlx_on_the_cpu_target(fallbacks):
    target = Target("cpu", torch.device("cpu"), "CPU", "CPU")
    shims = {"aten::add.Tensor": SHIMS["add"]}
    x, i = torch.randn(6), torch.arange(6)
    expected = (x + 1.5, torch.add(i, 2.5, alpha=2), torch.add(x.double(), 2))
    library = Engine(target, CapabilityCache.open("cpu"), shims=shims, unsupported=(MlxUnsupported,),
                     prefer_mlx=True).install()
    try:
        assert registered("aten::add.Tensor", "CPU")
        got = (x + 1.5, torch.add(i, 2.5, alpha=2), torch.add(x.double(), 2))
    finally:
        library._destroy()
    assert not registered("aten::add.Tensor", "CPU")
    # MLX ran the first; the others it refused (alpha; float64) and the CPU's own kernel ran them,
    # the wrapped numbers 2.5 and 2 keeping their type promotion (int64 + 2.5 -> float32)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    torch.testing.assert_close(got, expected)
    assert fallbacks["aten::add.Tensor", "mlx"] == 1 and fallbacks.total() == 1


def test_activate_with_prefer_mlx_registers_every_verified_shim():
    from torchdevice_generated.fallback_table import MLX_ROUTES

    expected = set(MLX_ROUTES)  # every route reaches a backend kernel (tests/codegen/test_mlx_overlay.py)
    # every overload an MLX record covers is routed, but those whose route the consistency suite expects to fail
    covered = {dispatcher_name(e.name) for e in catalog.load()[1] if e.kind == "op_overload" and e.mlx}
    unrouted = {op for op, check in mlx_consistency.expected_failures() if check == "route"}
    assert expected == covered - unrouted and set(MLX_ROUTES.values()) <= set(SHIMS)
    patcher = Patcher()
    activate(patcher, for_name("cpu"), {"prefer_mlx": True})
    try:
        assert {name for name in MLX_ROUTES if registered(name, "CPU")} == expected
        assert len(patcher) == (1 if expected else 0)
    finally:
        patcher.restore()
    assert not any(registered(name, "CPU") for name in MLX_ROUTES)
