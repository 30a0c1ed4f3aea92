"""What the fallback engine needs from the catalog, by aten overload (``fallback_table.py.j2``).

- **missing on MPS**: overloads whose entry (``torch.ops.aten.<op>.<overload>``) has no MPS kernel
  (``kernels.mps == "missing"``); the engine never tries them on MPS.
- **tried first on MPS**: overloads measured failing on MPS (``status.mps == "fail"``, of the
  overload's entry or of a Python-level entry reaching its op) that do have a kernel: some dtypes
  or arguments fail, so the engine tries MPS and watches.
- **composed on MPS**: overloads the CPU has a kernel of and MPS computes through a composite kernel
  (``kernels.cpu == "native"``, ``kernels.mps == "composite"``): the simulated Mac composes them as a Mac does.
- **sparse on MPS**: overloads MPS has a sparse COO kernel of (``catalog/scanned/sparse_mps.yaml``): the
  simulated Mac runs these on sparse tensors and refuses the others, as a Mac does.
- **MLX routes**: every overload an MLX shim covers, once the consistency tests measured the shim's
  record passing (``status.mlx == "pass"`` of its primary overload): overload -> shim.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.model import Catalog, Entry
from codegen.plan.mlx import Shim
from torchdevice.records import aten_entry, aten_op, dispatcher_name, is_aten_entry


@dataclass(frozen=True)
class FallbackTable:
    missing_on_mps: tuple[str, ...]
    try_on_mps: tuple[str, ...]
    composed_on_mps: tuple[str, ...]
    sparse_on_mps: tuple[str, ...]
    mlx_routes: tuple[tuple[str, str], ...]
    """``(aten overload, key of its verified MLX shim)``, sorted by overload."""

    @classmethod
    def of(cls, catalog: Catalog, shims: tuple[Shim, ...]) -> FallbackTable:
        overloads = [e for e in catalog.entries if e.kind == "op_overload" and is_aten_entry(e.name)]
        by_op: dict[str, list[Entry]] = {}
        for e in overloads:
            by_op.setdefault(aten_op(e.name), []).append(e)
        missing = {dispatcher_name(e.name) for e in overloads if e.kernels.mps == "missing"}
        failing = {
            dispatcher_name(o.name)
            for e in catalog.entries if e.status.mps == "fail"
            for o in ([e] if e.kind == "op_overload" else [o for op in e.aten for o in by_op.get(op, ())])
        }
        composed = {dispatcher_name(e.name) for e in overloads
                    if (e.kernels.cpu, e.kernels.mps) == ("native", "composite")}
        routes = {name: shim.key for shim in shims if shim.primary.status.mlx == "pass" for name in shim.aten}
        sparse = {dispatcher_name(aten_entry(name)) for name in catalog.sparse_mps}
        return cls(tuple(sorted(missing)), tuple(sorted(failing - missing)), tuple(sorted(composed)),
                   tuple(sorted(sparse)), tuple(sorted(routes.items())))
