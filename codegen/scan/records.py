"""Turn each public object found into a catalog entry: signatures, device parameters, aten ops and
kernels. What the runtime does with an entry is decided later, from these facts and the overlays."""

from __future__ import annotations

import inspect
from typing import Any

import torch

from codegen.scan import aten, kernels, signatures
from codegen.scan.devices import device_params
from codegen.scan.walk import Found
from codegen.signatures import Signature

KEYS = ("name", "kind", "module", "signatures", "device_params", "aten", "kernels")


def record(found: Found) -> dict[str, Any]:
    """The catalog record of ``found``, keys in :data:`KEYS` order."""
    ops = aten.reached(found)
    sigs = signatures_of(found, ops)
    if found.kind == "op_overload":
        op, _, overload = ops[0].partition(".")
        known = kernels.overloads().get((op, overload))
        kernel = dict(known.kernels) if known else dict(kernels.NONE)
    else:
        kernel = kernels.aggregate(ops)
    return {
        "name": found.name,
        "kind": found.kind,
        "module": found.module,
        "signatures": [str(s) for s in sigs],
        "device_params": device_params(sigs),
        "aten": ops,
        "kernels": kernel,
    }


def signatures_of(found: Found, ops: list[str]) -> list[Signature]:
    """Best available signatures (see :mod:`codegen.scan.signatures` for the sources)."""
    obj = found.obj
    if found.kind == "op_overload":
        return [signatures.from_schema(obj._schema)]  # type: ignore[attr-defined]
    if found.kind in ("property", "attribute"):
        return []
    if found.kind == "class":
        cls: type = obj  # type: ignore[assignment]
        return signatures.from_stub_class(cls) or signatures.from_python(cls, constructor=True)
    if found.owner is not None:
        return (
            signatures.from_stub_method(found.owner, found.attr)
            or (_from_schemas(ops, "self") if not inspect.isfunction(obj) else [])
            or signatures.from_python(obj)
        )
    name = getattr(obj, "__name__", found.attr)
    home = str(getattr(obj, "__module__", ""))
    if found.kind == "builtin":
        return (
            signatures.from_stub_function(signatures.c_stub(home), name)
            or signatures.from_stub_function(signatures.C_INIT, name)
            or _from_schemas(ops, "input")
            or signatures.from_python(obj)
        )
    stub = signatures.python_stub(home)
    return (
        signatures.from_stub_function(stub, name)
        or signatures.from_stub_function(stub, found.attr)
        or signatures.from_python(obj)
    )


def _from_schemas(ops: list[str], self_name: str) -> list[Signature]:
    """Signatures of the non-``out=`` overloads of ``ops`` from their aten schemas."""
    out: list[Signature] = []
    for op in ops:
        packet = getattr(torch.ops.aten, op)
        for overload in sorted(packet.overloads()):
            schema = getattr(packet, overload)._schema
            if not any(a.is_out for a in schema.arguments):
                out.append(signatures.from_schema(schema, self_name))
    return signatures.unique(out)
