"""Aten operators: the ``torch.ops.aten.<op>.<overload>`` objects, and which ops a Python-level entry
reaches.

An entry reaches, by name, the aten op of the same name: ``torch.X``, ``torch.Tensor.X`` (and the
in-place ``X_``), ``torch.nn.functional.X``; the namespaced ops ``linalg_X``, ``fft_X``,
``special_X``, ``sparse_X`` for ``torch.linalg.X``, ``torch.fft.X``... A Python function of
``torch.nn.functional`` also reaches the ops it calls as ``torch._C._nn.X``, ``torch.X`` or
``_VF.X``.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from functools import lru_cache

import torch
import torch.nn.functional

from codegen.scan.walk import Found
from torchdevice.records import aten_entry, aten_key

# Python namespace -> (aten op prefix) for ops that torchgen binds there.
PREFIXES = {
    "torch": "",
    "torch.Tensor": "",
    "torch.nn.functional": "",
    "torch.linalg": "linalg_",
    "torch.fft": "fft_",
    "torch.special": "special_",
    "torch.sparse": "sparse_",
    "torch.nested": "nested_",
}
REACHING_KINDS = frozenset({"function", "builtin", "method"})


@lru_cache(maxsize=1)
def op_names() -> frozenset[str]:
    """Every registered aten op name, private ones included (``add``, ``_softmax``...)."""
    names = torch._C._dispatch_get_all_op_names()
    return frozenset(n[len("aten::") :].partition(".")[0] for n in names if n.startswith("aten::"))


def overloads() -> Iterator[Found]:
    """``torch.ops.aten.<op>.<overload>`` for every op and overload, sorted: the public ops, and the
    private ones (``_softmax``, ``_fft_r2c``...) that public ops decompose into, which are what the
    dispatcher hands a backend and so what the fallback engine completes."""
    for op in sorted(op_names()):
        packet = getattr(torch.ops.aten, op)
        for overload in sorted(packet.overloads()):
            obj = getattr(packet, overload)
            yield Found(aten_entry(f"{op}.{overload}"), "torch", "op_overload", "aten", obj)


def reached(found: Found) -> list[str]:
    """Aten ops (``"op"``, or ``"op.overload"`` for an overload entry) that ``found`` reaches."""
    if found.kind == "op_overload":
        return [aten_key(found.name)]
    prefix = PREFIXES.get(found.namespace)
    if prefix is None or found.kind not in REACHING_KINDS:
        return []
    ops = {prefix + found.attr} & op_names()
    if found.namespace == "torch.nn.functional" and inspect.isfunction(found.obj):
        ops |= _functional_calls().get(found.attr, frozenset())
    return sorted(ops)


@lru_cache(maxsize=1)
def _functional_calls() -> dict[str, frozenset[str]]:
    """For each function of torch/nn/functional.py, the aten ops it calls directly."""
    tree = ast.parse(inspect.getsource(torch.nn.functional))
    calls: dict[str, frozenset[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            called = (_called_op(c.func) for c in ast.walk(node) if isinstance(c, ast.Call))
            calls[node.name] = frozenset(op for op in called if op is not None) & op_names()
    return calls


def _called_op(func: ast.expr) -> str | None:
    """``torch._C._nn.X``, ``torch.X`` or ``_VF.X`` -> ``X``."""
    if not isinstance(func, ast.Attribute):
        return None
    owner = ast.unparse(func.value)
    return func.attr if owner in ("torch._C._nn", "torch", "_VF") else None
