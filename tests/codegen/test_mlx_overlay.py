"""catalog/overlays/mlx.yaml names real MLX callables and parameters and fits the catalog's signatures.

These check the data; the generated per-op tests (generated/tests/test_mlx_ops.py) prove that the
mappings compute what torch computes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from collections import Counter
from typing import Any

import pytest
import torch

from codegen.load import load
from codegen.overlays.mlx import Family, MlxCall, Recipe, Transform
from codegen.plan.mlx import Shim
from torchdevice.fallback import mlx_bridge

CATALOG = load()
ENTRIES = [e for e in CATALOG.entries if e.mlx is not None]


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


def calls(entry) -> list[MlxCall]:
    m = entry.mlx
    main = MlxCall(mlx=m.mlx, args=m.args, fixed=m.fixed, cast=m.cast)
    return [main] + ([m.also] if m.also else [])


def test_at_least_400_entries_are_mapped_across_the_namespaces():
    assert len(ENTRIES) >= 400
    namespaces = Counter(e.namespace for e in ENTRIES)
    for ns in ("torch", "torch.Tensor", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special"):
        assert namespaces[ns] > 0, ns


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_mapping_names_real_mlx_callables_and_torch_parameters(entry):
    for call in calls(entry):
        fn = resolve(call.mlx)
        assert callable(fn), call.mlx
        positional, names = mlx_parameters(fn)
        for torch_param, target in call.args.items():
            if isinstance(target, int):
                assert target < len(positional), f"{torch_param} -> position {target} of {call.mlx}{positional}"
            else:
                assert target in names, f"{torch_param} -> {target!r}: not a parameter of {call.mlx} {sorted(names)}"
        for name in call.fixed:
            assert name in names, f"fixed {name!r}: not a parameter of {call.mlx}"
    # ... and fits the catalog's signature of the torch entry
    shim = Shim(entry, entry.mlx)
    shim.validate()  # selected overload, required and defaulted parameters
    names = {p.name for p in shim.params}
    assert entry.mlx.torch_params <= names
    if entry.kind == "method":
        assert shim.params[0].name == "self"
    if entry.mlx.returns not in (None, "tuple", "bool"):
        assert isinstance(getattr(torch.return_types, entry.mlx.returns), type)


def test_vocabularies_have_implementations():
    for kind in typing.get_args(Transform):
        assert kind in ("cast_input", "accumulate") or callable(getattr(mlx_bridge, f"translate_{kind}", None)), kind
    assert set(typing.get_args(Family)) == set(mlx_bridge.FAMILIES)
    recipes = importlib.import_module("mlx_samples").RECIPES
    assert set(typing.get_args(Recipe)) == set(recipes)
