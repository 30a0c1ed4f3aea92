"""The fallback engine: MLX route against CPU route, conversion cost, cost of a cached decision, cost of
torch's check before an MLX call, install.

Ops run on the simulated Mac's device (:mod:`torchdevice.simulated`), marked missing there, so each call goes
through the engine's kernel exactly as on MPS: verdict lookup, then the MLX shim or the CPU route. On this machine
MLX computes on the CPU (mlx-cpu) and the simulated device's memory is host memory, so the figures are the engine's
own cost plus the routes' copies, not an Apple GPU's speed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from bench.timing import per_call
from torchdevice.fallback import Engine
from torchdevice.fallback.cache import CapabilityCache
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import chosen

MB = 2**20
ROUNDS = 3


def _engine_run(op: str, name: str, shims: dict[str, Callable[..., Any]], call: Callable[..., object],
                inputs: tuple[torch.Tensor, ...], number: int, check: torch.Tensor | None = None) -> float:
    """Best per-call seconds of ``call(*inputs)`` on the simulated device's copies of ``inputs``, with ``name``
    missing there (``check``: the result it must give, within float32 tolerances)."""
    from torchdevice.fallback.mlx_bridge import MlxUnsupported

    with SimulatedKernels(chosen(missing={op}, table_missing={name})) as target:
        engine = Engine(target, CapabilityCache(target.name, None), shims=shims, unsupported=(MlxUnsupported,))
        library = engine.install()
        try:
            on_device = tuple(t.to(target.device) for t in inputs)
            if check is not None:
                torch.testing.assert_close(call(*on_device).cpu(), check, rtol=1e-4, atol=1e-3)
            return per_call(lambda: call(*on_device), number=number, repeat=3)
        finally:
            library._destroy()


def routes() -> Iterator[dict[str, Any]]:
    """MLX route vs CPU route for a large elementwise op, a reduction and a matmul."""
    from torchdevice_generated.mlx_shims import SHIMS

    x, a, b = torch.randn(4 * MB), torch.randn(1024, 1024), torch.randn(1024, 1024)
    cases: list[tuple[str, str, str, str, Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]] = [
        ("elementwise exp, 16 MB float32", "exp", "aten::exp", "exp", torch.exp, (x,)),
        ("reduction sum(dim=1), 4 MB float32", "sum", "aten::sum.dim_IntList", "sum", lambda t: t.sum(1), (a,)),
        ("matmul 1024x1024 float32", "mm", "aten::mm", "mm", torch.mm, (a, b)),
    ]
    for label, op, name, entry, call, inputs in cases:
        shim = SHIMS.get(entry)
        if shim is None:
            yield {"name": f"route: {label}", "skipped": f"no generated MLX shim for {entry}"}
            continue
        expected = call(*inputs)
        best_mlx = best_cpu = float("inf")
        for round in range(ROUNDS):
            check = expected if round == 0 else None  # the routes compute it right
            best_cpu = min(best_cpu, _engine_run(op, name, {}, call, inputs, number=5, check=check))
            best_mlx = min(best_mlx, _engine_run(op, name, {name: shim}, call, inputs, number=5, check=check))
        native = per_call(lambda: call(*inputs), number=5, repeat=ROUNDS)  # noqa: B023
        yield {"name": f"route: {label}", "mlx_route_s": best_mlx, "cpu_route_s": best_cpu,
               "native_cpu_s": native, "mlx_over_cpu": best_mlx / best_cpu}


def conversion() -> Iterator[dict[str, Any]]:
    """Seconds per MB moving a float32 tensor into MLX and back, and the CPU route's argument copy."""
    for mb in (1, 16, 64):
        yield _conversion(mb)


def _conversion(mb: int) -> dict[str, Any]:
    import mlx.core as mx

    from torchdevice.fallback.mlx_bridge import to_mlx, to_torch

    t = torch.randn(mb * MB // 4)
    a = to_mlx(t)
    mx.eval(a)
    return {
        "name": f"conversion {mb} MB",
        "torch_to_mlx_s_per_mb": per_call(lambda: mx.eval(to_mlx(t)), number=10, repeat=5) / mb,
        "mlx_to_torch_s_per_mb": per_call(lambda: to_torch(a), number=10, repeat=5) / mb,
        "cpu_route_copy_s_per_mb": per_call(lambda: t.to("cpu", copy=True), number=10, repeat=5) / mb,
    }


def decision_overhead() -> Iterator[dict[str, Any]]:
    """A call whose verdict is cached (missing: CPU route) against the same op that the simulated device computes
    itself (its kernel over host memory): the engine's own cost per call."""
    x = torch.randn(16)
    best_engine = best_direct = float("inf")
    for _ in range(ROUNDS):
        best_engine = min(best_engine, _engine_run("cumsum", "aten::cumsum", {}, lambda t: torch.cumsum(t, 0), (x,),
                                                   number=20_000))
        with SimulatedKernels(chosen()) as target:
            on_device = x.to(target.device)
            best_direct = min(best_direct, per_call(lambda t=on_device: torch.cumsum(t, 0), number=20_000, repeat=3))
    yield {"name": "cached fallback decision, cumsum of 16 floats", "engine_s": best_engine,
           "device_kernel_s": best_direct, "overhead_s": best_engine - best_direct}


def meta_check() -> Iterator[dict[str, Any]]:
    """torch's check before an MLX call (:func:`torchdevice.fallback.validate.expect`) against the MLX
    call it guards (the shim alone), on small inputs, where the check weighs most: per call with the
    call's signature remembered (a loop calling with the same shapes), and when it is new."""
    from torchdevice_generated.mlx_shims import SHIMS

    from torchdevice.device.aten import OpSchema
    from torchdevice.fallback import route, validate

    aten = torch.ops.aten
    cases = [
        ("exp of 16 floats", aten.exp.default, (torch.randn(16),), "exp"),
        ("add 64x64 + 64", aten.add.Tensor, (torch.randn(64, 64), torch.randn(64)), "add"),
        ("in-place add_ 64x64 + 64", aten.add_.Tensor, (torch.randn(64, 64), torch.randn(64)), "add"),
        ("sum(dim=1) of 256x256", aten.sum.dim_IntList, (torch.randn(256, 256), [1]), "sum"),
        ("cat of 3 64x64", aten.cat.default, ([torch.randn(64, 64)] * 3,), "cat"),
        ("mm 256x256", aten.mm.default, (torch.randn(256, 256), torch.randn(256, 256)), "mm"),
    ]
    for label, op, args, key in cases:
        shim, inputs = SHIMS[key], route.inputs(OpSchema.of(op), args, {})
        remembered = per_call(lambda: validate.expect(op, args, {}), number=5000, repeat=5)  # noqa: B023
        new = per_call(lambda: (validate.known.clear(), validate.expect(op, args, {})),  # noqa: B023
                       number=200, repeat=5)
        mlx = per_call(lambda: shim(**inputs), number=50, repeat=5)  # noqa: B023
        yield {"name": f"meta check: {label}", "check_s": remembered, "check_new_signature_s": new,
               "mlx_call_s": mlx, "check_over_mlx": remembered / mlx}


def install() -> Iterator[dict[str, Any]]:
    """Registering the MPS kernel table (every overload the catalog lists as missing on MPS)."""
    from torchdevice_generated.fallback_table import MISSING_ON_MPS as missing
    best = float("inf")
    for _ in range(ROUNDS):
        with SimulatedKernels(chosen(table_missing=missing)) as target:
            engine = Engine(target, CapabilityCache(target.name, None))
            start = time.perf_counter()
            library = engine.install()
            best = min(best, time.perf_counter() - start)
            library._destroy()
    yield {"name": "install: register the MPS table", "overloads": len(missing), "seconds": best}


def _training(device: str, steps: int = 5) -> float:
    """A small CUDA-style training loop with ops MPS lacks (adaptive_max_pool3d, multilabel_margin_loss,
    heaviside); returns the last loss."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    conv = torch.nn.Conv3d(2, 4, 3).to(device)
    head = torch.nn.Linear(4 * 2 * 2 * 2, 5).to(device)
    optimizer = torch.optim.SGD([*conv.parameters(), *head.parameters()], lr=0.01)
    x = torch.randn(8, 2, 8, 8, 8, device=device)
    labels = torch.randint(-1, 5, (8, 5), device=device)
    loss = torch.zeros((), device=device)
    for _ in range(steps):
        optimizer.zero_grad()
        features = F.adaptive_max_pool3d(conv(x), 2).flatten(1)
        scores = head(features * torch.heaviside(features.detach(), torch.tensor(1.0, device=device)))
        loss = F.multilabel_margin_loss(scores, labels)
        loss.backward()
        optimizer.step()
    return loss.item()


def simulated_program() -> Iterator[dict[str, Any]]:
    """The fallback engine's cost on the simulated Mac (``mps-sim``): a training loop with ops MPS lacks,
    against the same loop on the CPU with torchdevice not installed (alternating rounds, one process), and
    the time spent in the fallback routes (the CPU and MLX routes' own time, timed around each call)."""
    import torchdevice
    from torchdevice.fallback import route

    spent = [0.0]

    def timed(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - start
        return call

    native_s = simulated_s = fallback_s = float("inf")
    on_cpu, on_mlx = route.on_cpu, route.on_mlx
    for _ in range(ROUNDS):
        native_s = min(native_s, per_call(lambda: _training("cpu"), number=1, repeat=1))
        with torchdevice.installed("mps-sim"):
            route.on_cpu, route.on_mlx = timed(on_cpu), timed(on_mlx)
            try:
                _training("cuda")  # first call: verdicts, caches
                spent[0] = 0.0
                start = time.perf_counter()
                _training("cuda")
                simulated_s = min(simulated_s, time.perf_counter() - start)
                fallback_s = min(fallback_s, spent[0])
            finally:
                route.on_cpu, route.on_mlx = on_cpu, on_mlx
    report = torchdevice.report()["fallbacks"]
    yield {"name": "mps-sim: 5 training steps with adaptive_max_pool3d, heaviside, multilabel_margin_loss",
           "native_cpu_s": native_s, "simulated_s": simulated_s, "in_fallback_routes_s": fallback_s,
           "simulated_over_native": simulated_s / native_s, "fell_back": sorted(report)}


def _fit(device: str, dtype: torch.dtype = torch.float64, steps: int = 20) -> float:
    """numpy data on the device (float64 as numpy makes it, or converted to ``dtype`` first), a least-squares
    fit, and a float32 model trained against targets of that dtype (promoted losses); returns the last loss."""
    import numpy as np

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.normal(size=(512, 16))).to(dtype).to(device)
    y = X @ torch.linspace(-1, 1, 16, dtype=dtype, device=device) + 0.5
    torch.linalg.lstsq(torch.cat([X, torch.ones(512, 1, dtype=dtype, device=device)], 1), y.unsqueeze(1))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    features = X.float()
    loss = torch.zeros((), device=device)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = ((model(features).squeeze(1) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    return loss.item()


def hosted_program() -> Iterator[dict[str, Any]]:
    """float64 on the simulated Mac (hosted tensors, as on a Mac) against the same program on the CPU with
    torchdevice not installed, and against the same program in float32 on the simulated Mac (the simulation's
    own cost per op, which a Mac does not have), alternating rounds in one process."""
    import torchdevice

    native_s = hosted_s = float32_s = float("inf")
    for _ in range(ROUNDS):
        native_s = min(native_s, per_call(lambda: _fit("cpu"), number=1, repeat=1))
        with torchdevice.installed("mps-sim"):
            hosted_s = min(hosted_s, per_call(lambda: _fit("cuda"), number=1, repeat=1))
            float32_s = min(float32_s, per_call(lambda: _fit("cuda", torch.float32), number=1, repeat=1))
    yield {"name": "mps-sim: numpy data, lstsq and 20 steps of a float32 model, float64 targets (hosted)",
           "native_cpu_s": native_s, "simulated_s": hosted_s, "simulated_float32_data_s": float32_s,
           "simulated_over_native": hosted_s / native_s, "float64_over_float32_on_simulated": hosted_s / float32_s}


def limit_guards() -> Iterator[dict[str, Any]]:
    """What a guard of MPS's limits costs a call it lets through: ops with limits on the simulated target, the
    engine installed (it guards them: a Python kernel checking the call's shapes, dtypes and arguments) or not,
    in alternating rounds, in CPU time."""
    a, b, x = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(4, 8)
    mask = x > 5
    cases = {"bmm": lambda: torch.bmm(a, b), "sum.dim_IntList": lambda: x.sum(1),
             "masked_fill_": lambda: x.masked_fill_(mask, 0.0)}
    plain = {name: float("inf") for name in cases}
    guarded = dict(plain)
    with SimulatedKernels(chosen()) as target:
        for _ in range(ROUNDS):
            for name, call in cases.items():
                plain[name] = min(plain[name], per_call(call, number=20_000, repeat=3, timer=time.process_time))
            library = Engine(target, CapabilityCache(target.name, None), macos=(14, 0)).install()
            try:
                for name, call in cases.items():
                    guarded[name] = min(guarded[name],
                                        per_call(call, number=20_000, repeat=3, timer=time.process_time))
            finally:
                library._destroy()
    for name in cases:
        yield {"name": f"limit guard: {name} of small tensors on the simulated target", "plain_s": plain[name],
               "guarded_s": guarded[name], "added_s": guarded[name] - plain[name]}


def run() -> Iterator[dict[str, Any]]:
    yield from limit_guards()
    yield from simulated_program()
    yield from hosted_program()
    yield from routes()
    yield from conversion()
    yield from decision_overhead()
    yield from meta_check()
    yield from install()
