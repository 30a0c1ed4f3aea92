"""The MLX shims (``mlx_shims.py.j2``): one per ``catalog/overlays/mlx.yaml`` record, and the aten
overloads it covers.

A record keyed by an op (``abs``) covers the overloads of the op and of its in-place op (``abs_``)
that have a backend kernel of their own (CompositeImplicitAutograd ones decompose before a backend
kernel runs) and that the record fits: every input parameter is named by the record or keeps a
default the shim can refuse to leave. ``out=`` outputs (required keyword-only tensors) are not
inputs: the engine writes the result into them, as it writes an in-place result into ``self``. A
record keyed by an overload (``max.dim``), or with ``overloads``, covers those only.

The shim takes the union of the covered overloads' inputs as keyword arguments (the engine binds the
dispatcher's positional arguments to the schema's names), converts tensors to MLX arrays, calls MLX
and returns torch tensors on the device of its inputs; torch's meta kernel has checked the call and
the engine gives the result torch's dtypes. Inconsistent records raise :class:`ShimError`.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from codegen.model import Catalog, Entry, MlxRecord
from codegen.overlays.mlx import INPUT_CASTS, MlxOp
from codegen.plan.policies import PlanError
from codegen.signatures import P, Param
from torchdevice.records import aten_entry, aten_op, dispatcher_name

BACKEND_KERNELS = ("native", "composite")
"""Kernel states of an overload whose calls reach a backend kernel (where the engine registers)."""


class ShimError(PlanError):
    """An MLX record that does not fit the aten op it names; the message names the record."""

    def __init__(self, key: str, message: str):
        super().__init__(key, f"catalog/overlays/mlx.yaml: {message}")


@dataclass(frozen=True)
class Shim:
    record: MlxRecord
    overloads: tuple[Entry, ...]
    """The covered overload entries, functional ones first."""

    @property
    def key(self) -> str:
        return self.record.key

    @property
    def op(self) -> MlxOp:
        return self.record.op

    @property
    def function(self) -> str:
        """Python name of the shim: ``max.dim`` -> ``aten_max_dim``."""
        return "aten_" + self.key.replace(".", "_")

    @property
    def aten(self) -> tuple[str, ...]:
        """The covered overloads as the dispatcher names them (``aten::abs``, ``aten::abs.out``)."""
        return tuple(dispatcher_name(e.name) for e in self.overloads)

    @property
    def primary(self) -> Entry:
        """The overload whose entry carries the record's measured status (``status.mlx``)."""
        return self.overloads[0]

    def fail(self, message: str) -> ShimError:
        return ShimError(self.key, message)

    @cached_property
    def params(self) -> tuple[Param, ...]:
        """The shim's keyword parameters: each input of a covered overload once, in first-seen order,
        with the first default an overload gives (``None`` where none has one but some lack the input)."""
        found: dict[str, list[Param]] = {}
        for entry in self.overloads:
            for p in inputs(entry):
                found.setdefault(p.name, []).append(p)
        out = []
        for name, seen in found.items():
            default = next((p.default for p in seen if p.default is not None), None)
            if default is None and len(seen) < len(self.overloads):
                default = "None"
            out.append(Param(name, P.KEYWORD_ONLY, seen[0].annotation, default))
        return tuple(out)

    @property
    def signature(self) -> tuple[str, ...]:
        """``*`` and the parameters with their defaults (literals, lists as tuples; ``_b.UNSET`` for others)."""
        return ("*", *(p.name + ("" if p.default is None else "=" + _default_source(p.default)) for p in self.params))

    @property
    def def_line(self) -> str:
        return _wrap(f"def {self.function}(", self.signature, "):", indent=0)

    @property
    def refusals(self) -> tuple[tuple[str, str], ...]:
        """``(condition, parameter)``: an argument left at a value MLX cannot honour."""
        out = []
        for p in self.params:
            if p.name in self.op.params:
                continue
            default = p.default or ""
            if not _is_literal(default):
                out.append((f"{p.name} is not _b.UNSET", p.name))
            elif default in ("None", "True", "False"):
                out.append((f"{p.name} is not {default}", p.name))
            else:
                out.append((f"{p.name} != {_default_source(default)}", p.name))
        return tuple(out)

    @cached_property
    def converted(self) -> tuple[str, ...]:
        """Parameters passed to MLX as they come (tensors become arrays; others pass through)."""
        return tuple(p.name for p in self.params if p.name in self.op.params and p.name not in self.op.values
                     and p.name not in self.op.ignore)

    @property
    def first_tensor(self) -> str:
        """The input whose dtype is checked and that translations read (``dtype_of``, else the first tensor)."""
        if self.op.dtype_of is not None:
            if self.op.dtype_of not in self.converted:
                raise self.fail(f"dtype_of {self.op.dtype_of!r} is not a mapped parameter")
            return self.op.dtype_of
        tensors = [p.name for p in self.params if p.name in self.converted and "Tensor" in (p.annotation or "")]
        if not tensors:
            raise self.fail("no tensor parameter is mapped")
        return tensors[0]

    @property
    def tensors(self) -> tuple[str, ...]:
        """Mapped parameters that may hold tensors (what the device and emptiness checks look at)."""
        return tuple(p.name for p in self.params
                     if p.name in self.converted and any(t in (p.annotation or "") for t in ("Tensor", "number")))

    @property
    def conversions(self) -> tuple[tuple[str, str], ...]:
        """``(local, expression)`` computing each MLX argument from the arguments."""
        op = self.op
        out = []
        for name in self.converted:
            cast = ", _mlx_common" if name in op.promote else ""
            out.append((f"_x_{name}", f"_b.arg({name}{cast})"))
        if op.input_cast is not None:
            param, kind = op.input_cast
            first = f"_x_{self.first_tensor}"
            flag = ", accumulate=True" if kind == "accumulate" else ""
            out.append((first, f"_b.cast_input({first}, {param}{flag})"))
        if op.opmath:
            out += [(f"_x_{name}", f"_b.opmath(_x_{name})") for name in self.tensors]
        for param, kind in op.values.items():
            if kind not in INPUT_CASTS:
                out.append((f"_x_{param}", f"_b.translate_{kind}({param}, {self.first_tensor})"))
        return tuple(out)

    def _call(self, local_name: str, mlx: str, args: Mapping[str, str | int], fixed: Mapping[str, object]) -> str:
        names = {p.name for p in self.params}
        unknown = set(args) - names
        if unknown:
            raise self.fail(f"mapped parameters {sorted(unknown)} are in no covered overload")
        positions = sorted((v, k) for k, v in args.items() if isinstance(v, int))
        if [v for v, _ in positions] != list(range(len(positions))):
            raise self.fail(f"positions {[v for v, _ in positions]} must be 0..n-1")
        local = {k: f"_x_{k}" for k in args}
        pieces = [local[k] for _, k in positions]
        pieces += [f"{v}={local[k]}" for k, v in args.items() if isinstance(v, str)]
        pieces += [f"{k}={v!r}" for k, v in fixed.items()]
        if self.op.stream == "cpu":
            pieces.append("stream=mlx.core.cpu")
        return _wrap(f"{local_name} = {mlx}(", tuple(pieces), ")", indent=8)

    @property
    def call(self) -> str:
        return self._call("_mlx_result", self.op.mlx, self.op.args, self.op.fixed)

    @property
    def also_call(self) -> str | None:
        also = self.op.also
        return None if also is None else self._call("_mlx_also", also.mlx, also.args, also.fixed)

    @property
    def checks(self) -> tuple[str, ...]:
        """The data checks the shim makes before its MLX call (``torchdevice.fallback.data_checks``)."""
        out = []
        index = self.op.index_range
        if index is not None:
            out.append(f"_checks.index_range({self.key!r}, _x_{index.index}, _checks.size({index.of}, {index.dim}), "
                       f"wraps={index.wraps})")
        if self.op.nonzero is not None:
            promoted = ", ".join(self.op.promote)
            dtype = f"torch.result_type({promoted})" if promoted else f"{self.first_tensor}.dtype"
            out.append(f"_checks.nonzero_divisor({self.key!r}, _x_{self.op.nonzero}, {dtype})")
        if self.op.representable is not None:
            out.append(f"_checks.representable({self.key!r}, {self.op.representable}, {self.first_tensor}.dtype)")
        if self.op.integer_power is not None:
            out.append(f"_checks.integer_power({self.key!r}, self, {self.op.integer_power})")
        if self.op.unit_interval is not None:
            out.append(f"_checks.unit_interval({self.key!r}, _x_{self.op.unit_interval})")
        return tuple(out)

    @property
    def result(self) -> str:
        """The expression turning the MLX result(s) into torch tensors."""
        if self.op.also is not None:
            return "(_b.to_torch(_mlx_result, _mlx_device), _b.to_torch(_mlx_also, _mlx_device))"
        if self.op.outputs > 1:
            return "tuple(_b.to_torch(_mlx_item, _mlx_device) for _mlx_item in _mlx_result)"
        return "_b.to_torch(_mlx_result, _mlx_device)"

    def validate(self) -> None:
        """Raise ShimError for a record that cannot produce a working shim."""
        read = [self.op.index_range.index if self.op.index_range else None, self.op.nonzero, self.op.unit_interval]
        unconverted = [n for n in read if n is not None and n not in self.converted]
        if unconverted:
            raise self.fail(f"data checks read parameters that are not passed to MLX: {unconverted}")
        missing = set(self.op.promote) - set(self.converted)
        if missing:
            raise self.fail(f"promote names parameters that are not passed to MLX: {sorted(missing)}")
        names = {p.name for p in self.params}
        unknown = (self.op.params | set(self.op.promote)) - names
        if unknown:
            raise self.fail(f"names parameters of no covered overload: {sorted(unknown)}")
        _ = self.call, self.also_call, self.conversions, self.first_tensor


def inputs(entry: Entry) -> tuple[Param, ...]:
    """The parameters of an overload that carry input (not its ``out=`` tensors), schema keywords renamed
    as the catalog writes them (``from`` -> ``from_``)."""
    params = entry.signatures[0].params if entry.signatures else ()
    return tuple(p for p in params if not _is_output(p))


def _is_output(p: Param) -> bool:
    return p.kind == P.KEYWORD_ONLY and p.default is None and p.annotation in ("Tensor", "List[Tensor]")


def shims(catalog: Catalog) -> tuple[Shim, ...]:
    """The validated shim of every MLX record."""
    by_op: dict[str, list[Entry]] = {}
    for e in catalog.entries:
        if e.kind == "op_overload":
            by_op.setdefault(aten_op(e.name), []).append(e)
    out = []
    claimed: dict[str, str] = {}
    for record in catalog.mlx:
        op, _, overload = record.key.partition(".")
        if overload:
            candidates = [catalog[aten_entry(record.key)]]
        else:
            candidates = by_op.get(op, []) + (by_op.get(op + "_", []) if record.op.inplace else [])
        covered = [e for e in candidates if _covers(record.op, e, overload or None)]
        covered.sort(key=lambda e: (_is_variant(e), e.name))
        shim = Shim(record, tuple(covered))
        if not covered:
            needs = [f"{dispatcher_name(e.name)} needs {', '.join(missing)}" for e in candidates
                     if e.kernels.cpu in BACKEND_KERNELS and (missing := _unnamed(record.op, e))]
            raise shim.fail("covers no overload: none has a backend kernel and fits the record"
                            + (f" ({'; '.join(needs)})" if needs else ""))
        shim.validate()
        for name in shim.aten:
            if name in claimed:
                raise shim.fail(f"{name} is covered by record {claimed[name]!r} too")
            claimed[name] = record.key
        out.append(shim)
    return tuple(out)


def _covers(op: MlxOp, entry: Entry, key_overload: str | None) -> bool:
    overload = entry.name.rpartition(".")[2]
    if entry.kernels.cpu not in BACKEND_KERNELS or not entry.signatures:
        return False
    if key_overload is None and op.overloads:
        return overload in op.overloads
    if not any("Tensor" in (p.annotation or "") for p in inputs(entry)):
        return False
    return not _unnamed(op, entry)


def _unnamed(op: MlxOp, entry: Entry) -> list[str]:
    """The required inputs of ``entry`` the record does not name (it can only refuse defaulted ones)."""
    return [p.name for p in inputs(entry) if p.name not in op.params and p.default is None]


def _is_variant(entry: Entry) -> bool:
    """An in-place or ``out=`` overload (sorted after the functional ones)."""
    op = aten_op(entry.name)
    return op.endswith("_") or len(inputs(entry)) < len(entry.signatures[0].params)


def _default_source(source: str) -> str:
    """A default as the shim writes it: lists become tuples (no mutable defaults), non-literals UNSET."""
    if not _is_literal(source):
        return "_b.UNSET"
    value = ast.literal_eval(source)
    return repr(tuple(value)) if isinstance(value, list) else source


def _wrap(head: str, items: tuple[str, ...], tail: str, indent: int, width: int = 120) -> str:
    """``head + items + tail`` on one line when it fits ``width``, else one item per line."""
    line = head + ", ".join(items) + tail
    if indent + len(line) <= width:
        return line
    inner = " " * (indent + 4)
    return head + "\n" + "".join(f"{inner}{item},\n" for item in items) + " " * indent + tail


def _is_literal(source: str) -> bool:
    try:
        ast.literal_eval(source)
    except (ValueError, SyntaxError):
        return False
    return source != "..."

