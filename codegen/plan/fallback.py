"""What the fallback engine needs from the catalog, by aten overload (``fallback_table.py.j2``).

- **missing on MPS**: overloads whose entry (``torch.ops.aten.<op>.<overload>``) has no MPS kernel
  (``kernels.mps == "missing"``); the engine never tries them on MPS.
- **tried first on MPS**: overloads measured failing on MPS (``status.mps == "fail"``, of the
  overload's entry or of a Python-level entry reaching its op) that do have a kernel: some dtypes
  or arguments fail, so the engine tries MPS and watches.
- **MLX routes**: for each entry with an MLX shim measured passing (``status.mlx == "pass"``), the
  overloads of its aten ops that the engine can hand to its shim as the dispatcher hands them to a
  kernel: positional schema arguments positionally, keyword-only ones by name, those equal to the
  schema's default left out. An overload qualifies when its first argument is a tensor, its
  positional parameters line up with the shim's (the first may be renamed, ``self`` -> ``input``),
  its keyword-only names are the shim's, the shim has the schema's defaults and needs nothing
  else, and it has no required keyword-only argument (``out=`` variants: they take the CPU route).
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.model import Catalog, Entry
from codegen.plan.mlx import Shim
from codegen.plan.policies import OVERLOAD_PREFIX, aten_name
from codegen.signatures import P, Param

_POSITIONAL = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)


def accepts(shim: Shim, schema: tuple[Param, ...]) -> bool:
    """Whether ``shim`` takes the calls of an overload with parameters ``schema``.

    The dispatcher leaves out arguments equal to the schema's default, so the shim's parameter must
    then default to the same value; and every other parameter of the shim must have a default.
    """
    positional = [p for p in schema if p.positional]
    keyword = [p for p in schema if p.kind == P.KEYWORD_ONLY]
    if not positional or "Tensor" not in (positional[0].annotation or ""):
        return False
    if any(p.default is None for p in keyword):
        return False
    slots = [p for p in shim.params if p.positional]
    if len(positional) > len(slots) or [p.name for p in positional[1:]] != [p.name for p in slots[1:len(positional)]]:
        return False
    by_name = {p.name: p for p in shim.params if p.kind != P.POSITIONAL_ONLY}
    pairs = [*zip(positional, slots[: len(positional)], strict=True), *((p, by_name.get(p.name)) for p in keyword)]
    if any(s is None or (p.default is not None and shim.default(s) != p.default) for p, s in pairs):
        return False
    supplied = {s.name for _, s in pairs if s is not None}
    return all(shim.default(p) is not None or p.name in supplied for p in shim.params if not p.variadic)


@dataclass(frozen=True)
class FallbackTable:
    missing_on_mps: tuple[str, ...]
    try_on_mps: tuple[str, ...]
    mlx_shims: tuple[tuple[str, str], ...]
    """``(aten overload, torch entry of its verified MLX shim)``, sorted by overload."""

    @classmethod
    def of(cls, catalog: Catalog, shims: tuple[Shim, ...]) -> FallbackTable:
        overloads = [e for e in catalog.entries if e.kind == "op_overload" and e.name.startswith(OVERLOAD_PREFIX)]
        by_op: dict[str, list[Entry]] = {}
        for e in overloads:
            by_op.setdefault(e.name.removeprefix(OVERLOAD_PREFIX).partition(".")[0], []).append(e)
        missing = {aten_name(e) for e in overloads if e.kernels.mps == "missing"}
        failing = {
            aten_name(o)
            for e in catalog.entries if e.status.mps == "fail"
            for o in ([e] if e.kind == "op_overload" else [o for op in e.aten for o in by_op.get(op, ())])
        }
        routes: dict[str, str] = {}
        for shim in shims:
            if shim.entry.status.mlx != "pass":
                continue
            for o in (o for op in shim.entry.aten for o in by_op.get(op, ())):
                if o.signatures and accepts(shim, o.signatures[0].params):
                    routes.setdefault(aten_name(o), shim.name)
        return cls(tuple(sorted(missing)), tuple(sorted(failing - missing)), tuple(sorted(routes.items())))
