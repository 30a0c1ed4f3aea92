"""catalog/overlays/mlx.yaml names real MLX callables and parameters, and every record is reachable:
each overload it covers is one the dispatcher hands to a backend kernel, where the engine registers.

These check the data; the consistency suite (tests/fallback/test_mlx_consistency.py) proves that the
records compute what torch computes.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import typing
from typing import Any

import pytest
import torch
from planned import catalog, planned

from codegen.overlays.mlx import Family, MlxCall, Transform
from codegen.schema import CatalogError
from torchdevice.fallback import mlx_bridge

SHIMS = planned().shims


def resolve(dotted: str) -> Any:
    """The object at ``dotted``: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError(dotted)


def mlx_parameters(fn: Any) -> tuple[list[str], set[str]]:
    """(parameters that may be passed positionally, in order; every parameter name) of an MLX callable."""
    if inspect.isfunction(fn):  # mlx.nn: Python functions
        params = inspect.signature(fn).parameters.values()
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return positional, {p.name for p in params}
    # mlx.core: the binding's docstring opens with its signature, e.g. "sum(a: array, /, axis: ...) -> array"
    head = fn.__doc__.split("\n")[0]
    args = ast.parse(f"def f{head[head.index('('):head.rindex(')') + 1]}: ...").body[0].args
    positional = [a.arg for a in args.posonlyargs + args.args]
    return positional, set(positional) | {a.arg for a in args.kwonlyargs}


@pytest.mark.parametrize("shim", SHIMS, ids=lambda s: s.key)
def test_record_names_real_mlx_callables_and_parameters(shim):
    op = shim.op
    for call in [MlxCall(op.mlx, op.args, op.fixed), *([op.also] if op.also else [])]:
        fn = resolve(call.mlx)
        assert callable(fn), call.mlx
        positional, names = mlx_parameters(fn)
        for param, target in call.args.items():
            if isinstance(target, int):
                assert target < len(positional), f"{param} -> position {target} of {call.mlx}{positional}"
            else:
                assert target in names, f"{param} -> {target!r}: not a parameter of {call.mlx} {sorted(names)}"
        for name in call.fixed:
            assert name in names, f"fixed {name!r}: not a parameter of {call.mlx}"


@pytest.mark.parametrize("shim", SHIMS, ids=lambda s: s.key)
def test_every_covered_overload_reaches_a_backend_kernel(shim):
    for name in shim.aten:
        op_name, _, overload = name.removeprefix("aten::").partition(".")
        assert getattr(getattr(torch.ops.aten, op_name), overload or "default")._schema is not None
        assert not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"), name
        assert any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in (
            "CPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")), name


def test_implicit_ops_are_not_claimed_and_their_decompositions_are():
    covered = {name for shim in SHIMS for name in shim.aten}
    for implicit, target in (("aten::matmul", "aten::mm"), ("aten::softmax.int", "aten::_softmax"),
                             ("aten::log_softmax.int", "aten::_log_softmax")):
        assert implicit not in covered and target in covered


def test_vocabularies_have_implementations():
    for kind in typing.get_args(Transform):
        assert kind in ("cast_input", "accumulate") or callable(getattr(mlx_bridge, f"translate_{kind}", None)), kind
    assert set(typing.get_args(Family)) == set(mlx_bridge.FAMILIES)


@pytest.mark.parametrize(("text", "says"), [
    ("matmul: {mlx: mlx.core.matmul, args: {self: 0, other: 1}}\n", "covers no overload"),  # implicit
    ("abs: {mlx: mlx.core.abs, args: {input: 0}}\n", "aten::abs needs self"),
    ("abs: {mlx: mlx.core.abs, args: {self: 0, input: 1}}\n", "names parameters of no covered overload"),
    ("abs: {mlx: mlx.core.abs, args: {self: 0}}\nabs.default: {mlx: mlx.core.abs, args: {self: 0}}\n",
     "aten::abs is covered by record 'abs' too"),
    ("teleport: {mlx: mlx.core.abs}\n", "unknown aten op"),
    ("abs: {mlx: mlx.core.abs, args: {self: 0}, promote: [self]}\n", "promote names two parameters"),
])
def test_bad_records_name_the_record(tmp_path, text, says):
    """The MLX overlay read against the real catalog and planned (what ``make generate`` does with it)."""
    from codegen.load import load_mlx
    from codegen.plan import PlanError
    from codegen.plan import mlx as mlx_plan

    real = catalog()
    path = tmp_path / "mlx.yaml"
    path.write_text(text)
    with pytest.raises((CatalogError, PlanError), match=says):
        mlx_plan.shims(dataclasses.replace(real, mlx=load_mlx(path, {e.name: e for e in real.entries})))
