"""The MLX consistency suite's machinery: which calls exercise an aten overload, and running them
natively and through the MLX route.

Which OpInfos test an overload: those its MLX record names (``opinfo``), and those whose ``aten_name``,
name or alias, normalized (``linalg.cross`` -> ``linalg_cross``, ``nn.functional.gelu`` -> ``gelu``),
is the overload's op name (without a trailing ``_`` for in-place overloads, which use the OpInfo's
in-place variant). Names only
propose: a sample counts for an overload only if its native call *dispatches* to that overload, as
recorded by a :class:`~torch.utils._python_dispatch.TorchDispatchMode` (``torch.add(x, 2)``
reaches ``aten::add.Tensor``, never ``aten::add.Scalar``). A sample whose variant call does not
reach the overload is tried once more as a direct call of the overload itself (``aten::mul.Scalar``,
``aten::relu_``: overloads the Python API reaches only from C++), kept when it binds.

The route is the engine on the CPU target with ``prefer_mlx`` and the one overload's shim, so a
difference is that overload's; :class:`~fallback_support.Fallbacks` counts the calls MLX ran. The
overloads, and the dtypes each claims, are the MLX overlay's records as planned (:data:`SHIMS_OF`),
verified or not: this suite is what verifies them.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from collections.abc import Callable, Iterator
from functools import cache
from itertools import islice
from pathlib import Path
from typing import Any

import fallback_support
import torch
from expected_failures import ExpectedFailure, load
from outcomes import Call
from planned import planned
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import OpInfo
from torch.utils._python_dispatch import TorchDispatchMode
from torchdevice_generated.mlx_shims import SHIMS

from torchdevice.device.aten import overload as find_overload
from torchdevice.fallback import Engine, Target
from torchdevice.fallback.cache import CapabilityCache
from torchdevice.fallback.mlx_bridge import FAMILIES, MlxUnsupported

DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64)
CPU = Target("cpu", torch.device("cpu"), "CPU", "CPU")

SHIMS_OF = {overload: shim for shim in planned().shims for overload in shim.aten}
"""Aten overload -> the planned shim (``codegen.plan.mlx.Shim``) that computes it."""
ROUTED: dict[str, str] = {overload: shim.key for overload, shim in SHIMS_OF.items()}
"""Aten overload -> the key of its MLX shim."""


EXPECTED_FAILURES = Path(__file__).parents[1] / "fallback" / "mlx_expected_failures.yaml"


@cache
def expected_failures() -> dict[tuple[str, str], ExpectedFailure]:
    """(overload, check) -> why it fails on the installed torch release, from :data:`EXPECTED_FAILURES` (each
    record names the releases, ``2.10``..., it fails on)."""
    from torchdevice.releases import TESTED, release

    releases = tuple(f"{major}.{minor}" for major, minor in TESTED)
    here = "{}.{}".format(*release())
    return {case: failure for case, failure in load(EXPECTED_FAILURES, lists={"torch": releases}).items()
            if here in failure.extra["torch"]}


@cache
def registered() -> frozenset[str]:
    """The routed overloads the engine registers a kernel for, all shims installed with ``prefer_mlx``
    on the CPU target (an op that decomposes above the backend keys has no kernel to replace)."""
    library = Engine(CPU, CapabilityCache(CPU.name, None), shims={op: SHIMS[e] for op, e in ROUTED.items()},
                     prefer_mlx=True).install()
    try:
        return frozenset(op for op in ROUTED if fallback_support.registered(op, CPU.dispatch_key))
    finally:
        library._destroy()


def claimed(overload: str) -> frozenset[torch.dtype]:
    """The dtypes (of :data:`DTYPES`) the record of ``overload`` routes to MLX (its ``dtypes`` families)."""
    return frozenset(d for f in SHIMS_OF[overload].op.dtypes for d in FAMILIES[f]) & frozenset(DTYPES)


def status_entry(overload: str) -> str:
    """The catalog entry that carries the measured status of ``overload``'s record: every case of
    every overload of a record counts for it, so one failure keeps the whole record off MLX."""
    return SHIMS_OF[overload].primary.name


def _normalized(name: str) -> str:
    return name.removeprefix("nn.functional.").replace(".", "_")


@cache
def _by_name() -> dict[str, list[OpInfo]]:
    out: dict[str, list[OpInfo]] = {}
    for op in op_db:
        names = {_normalized(n) for n in (op.name, op.aten_name, *(a.name for a in op.aliases)) if n}
        for name in names:
            out.setdefault(name, []).append(op)
    return out


def base_name(overload: str) -> str:
    """``aten::add_.Tensor`` -> ``add_``."""
    return overload.removeprefix("aten::").partition(".")[0]


def opinfos(overload: str) -> list[OpInfo]:
    """The OpInfos named for ``overload``'s op (see the module docstring)."""
    names = [_normalized(n) for n in SHIMS_OF[overload].op.opinfo] if overload in SHIMS_OF else []
    names.append(base_name(overload).rstrip("_"))
    found = {id(op): op for name in names for op in _by_name().get(name, [])}
    return list(found.values())


class Dispatched(TorchDispatchMode):
    """Records the aten overloads called at the top of the dispatcher (below autograd)."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.add(func._name)
        return func(*args, **(kwargs or {}))


def reaches(call: Call, overload: str) -> bool:
    """Whether ``call`` dispatches to ``overload`` (it may raise there: error inputs do); records
    its native outcome."""
    recorder = Dispatched()
    with recorder:
        call.native = call.run()
    return overload in recorder.names


def _candidates(overload: str, samples: Iterator[Any], variant: Callable[..., Any] | None) -> Iterator[Call]:
    """Calls of the samples that reach ``overload``: the OpInfo variant's, else the overload's own; for
    an ``out=`` overload, given an empty ``out`` tensor of the result's dtype (torch resizes it)."""
    direct = find_overload(overload)
    outputs = _outputs(direct)
    if outputs and outputs != ["out"]:
        return  # several results to write: not sampled
    for s in samples:
        args, kwargs = (s.input, *s.args), dict(s.kwargs)
        if outputs:
            result = Call(variant, args, kwargs).run().result if variant is not None else None
            if not isinstance(result, torch.Tensor):
                continue
            kwargs["out"] = torch.empty(0, dtype=result.dtype)
        tries = ([Call(variant, args, kwargs)] if variant is not None else []) + (
            [Call(direct, *_as_scalars(direct, args, kwargs))] if direct is not None else [])
        yield from islice((call for call in tries if reaches(call, overload)), 1)


def _outputs(op: torch._ops.OpOverload | None) -> list[str]:
    """The keyword-only arguments ``op`` writes its results into (``out=``)."""
    if op is None:
        return []
    return [a.name for a in op._schema.arguments if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write]


def _as_scalars(op: torch._ops.OpOverload, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` for a direct call of ``op``: a tensor where the schema takes a
    ``Scalar`` becomes its first element (OpInfo samples pass tensors to ``torch.mul`` and
    ``torch.clamp`` that ``aten::mul.Scalar`` and ``aten::clamp`` take as numbers)."""
    schema = op._schema.arguments
    by_name = {p.name: p for p in schema}

    def scalar(param: Any, value: Any) -> Any:
        kind = getattr(param, "type", None)
        if isinstance(kind, torch._C.OptionalType):
            kind = kind.getElementType()
        if isinstance(kind, torch._C.NumberType) and isinstance(value, torch.Tensor) and value.numel():
            return value.flatten()[0].item()
        return value

    return (tuple(scalar(schema[i] if i < len(schema) else None, a) for i, a in enumerate(args)),
            {k: scalar(by_name.get(k), v) for k, v in kwargs.items()})


def _variant(op: OpInfo, overload: str) -> Callable[..., Any] | None:
    return op.inplace_variant if base_name(overload).endswith("_") else op.op


def _cast(sample: Any, dtype: torch.dtype) -> Any:
    """``sample`` with its floating-point tensors cast to ``dtype``."""
    return sample.transform(lambda t: t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t)


def calls(overload: str, dtype: torch.dtype, *, requires_grad: bool = False) -> Iterator[Call]:
    """The OpInfo samples of ``dtype`` that reach ``overload``, in an order shuffled with a fixed seed
    (OpInfos list their samples by shape, 0-d first), as calls whose native outcome is known; where
    no OpInfo has samples of ``dtype`` (the mapping claims a dtype the OpInfo does not list), its
    float32 samples cast to ``dtype``."""
    for op in opinfos(overload):
        supports = dtype in op.supported_dtypes("cpu")
        if supports or torch.float32 in op.supported_dtypes("cpu"):
            # sample_inputs_func directly: OpInfo.sample_inputs inspects the call stack on every call
            samples = _quietly(op.sample_inputs_func(op, "cpu", dtype if supports else torch.float32, requires_grad))
            random.Random(0).shuffle(samples)
            yield from _candidates(overload, (s if supports else _cast(s, dtype) for s in samples),
                                   _variant(op, overload))


def error_calls(overload: str) -> Iterator[Call]:
    """The OpInfo error inputs that reach ``overload``."""
    for op in opinfos(overload):
        if op.error_inputs_func is not None:
            errors = [e.sample_input for e in _quietly(op.error_inputs_func(op, "cpu"))]
            yield from _candidates(overload, iter(errors), _variant(op, overload))


def _quietly(samples: Iterator[Any]) -> list[Any]:
    """``samples``, without the deprecation warnings of the torch functions that make some."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(samples)


@contextlib.contextmanager
def mlx_route(overload: str, shim: Callable[..., Any] | None = None) -> Iterator[None]:
    """``overload`` goes to its MLX shim (or ``shim``) first, the CPU target with ``prefer_mlx``,
    while entered."""
    engine = Engine(CPU, CapabilityCache(CPU.name, None), shims={overload: shim or SHIMS[ROUTED[overload]]},
                    unsupported=(MlxUnsupported,), prefer_mlx=True)
    library = engine.install()
    try:
        yield
    finally:
        library._destroy()
