"""What the fallback engine needs from the catalog, by aten overload: the decisions
``fallback_table.py.j2`` renders.

- **missing on MPS**: overloads whose catalog entry (``torch.ops.aten.<op>.<overload>``) has no MPS
  kernel (``kernels.mps == "missing"``); the engine never tries them on MPS.
- **tried first on MPS**: overloads measured failing on MPS (``status.mps == "fail"``, of the
  overload's entry or of a Python-level entry reaching its op) that do have a kernel: some dtypes
  or arguments fail, so the engine tries MPS and watches.
- **MLX shims**: for each entry with a verified MLX mapping (``status.mlx == "pass"``), the overloads
  of its aten ops that the engine can hand to its shim as the dispatcher hands them to a kernel:
  positional schema arguments positionally, keyword-only ones by name, those equal to the schema's
  default left out. An overload qualifies when its first argument is a tensor, its positional
  parameters line up with the shim's (the first may be renamed, ``self`` -> ``input``), its
  keyword-only names are the shim's, the shim has the schema's defaults and needs nothing else,
  and it has no required keyword-only argument (``out=`` variants: they take the CPU route).
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.mlx_model import Shim
from codegen.model import Catalog, Entry, Param

OVERLOAD_PREFIX = "torch.ops.aten."
_POSITIONAL = ("positional_only", "positional_or_keyword")
_VARIADIC = ("var_positional", "var_keyword")


def aten_name(entry: Entry) -> str:
    """``torch.ops.aten.add.Tensor`` -> ``aten::add.Tensor``; the default overload has no suffix."""
    op, _, overload = entry.name.removeprefix(OVERLOAD_PREFIX).partition(".")
    return f"aten::{op}" if overload == "default" else f"aten::{op}.{overload}"


def accepts(shim: Shim, schema: tuple[Param, ...]) -> bool:
    """Whether ``shim`` takes the calls of an overload with parameters ``schema``.

    The dispatcher leaves out arguments equal to the schema's default, so the shim's parameter must
    then default to the same value; and every other parameter of the shim must have a default.
    """
    positional = [p for p in schema if p.kind in _POSITIONAL]
    keyword = [p for p in schema if p.kind == "keyword_only"]
    if not positional or "Tensor" not in (positional[0].annotation or ""):
        return False
    if any(p.default is None for p in keyword):
        return False
    slots = [p for p in shim.params if p.kind in _POSITIONAL]
    if len(positional) > len(slots) or [p.name for p in positional[1:]] != [p.name for p in slots[1:len(positional)]]:
        return False
    by_name = {p.name: p for p in shim.params if p.kind != "positional_only"}
    pairs = [*zip(positional, slots[: len(positional)], strict=True), *((p, by_name.get(p.name)) for p in keyword)]
    if any(s is None or (p.default is not None and shim.default(s) != p.default) for p, s in pairs):
        return False
    supplied = {s.name for _, s in pairs if s is not None}
    return all(shim.default(p) is not None or p.name in supplied for p in shim.params if p.kind not in _VARIADIC)


@dataclass(frozen=True)
class FallbackTable:
    missing_on_mps: tuple[str, ...]
    try_on_mps: tuple[str, ...]
    mlx_shims: tuple[tuple[str, str], ...]
    """``(aten overload, torch entry of its verified MLX shim)``, sorted by overload."""

    @classmethod
    def of(cls, catalog: Catalog) -> FallbackTable:
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
        shims: dict[str, str] = {}
        for e in catalog.entries:
            if e.mlx is None or e.status.mlx != "pass" or e.kind == "op_overload":
                continue
            shim = e.mlx.shim(e)
            for o in (o for op in e.aten for o in by_op.get(op, ())):
                if o.overloads and accepts(shim, o.overloads[0]):
                    shims.setdefault(aten_name(o), e.name)
        return cls(tuple(sorted(missing)), tuple(sorted(failing - missing)), tuple(sorted(shims.items())))
