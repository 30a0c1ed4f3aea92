"""What the MLX shim of one catalog entry looks like: the decisions ``mlx_shims.py.j2`` renders.

A :class:`Shim` joins an entry's selected signature with its :class:`MlxMapping`: the shim's
parameter list, the refusals (torch arguments MLX cannot honour), how each argument reaches the
MLX call, and how the result returns. Inconsistent records raise :class:`ShimError` naming the entry.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from codegen.model import Entry
from codegen.overlays.mlx import INPUT_CASTS, MlxCall, MlxMapping
from codegen.plan.policies import PlanError
from codegen.signatures import P, Param

TORCH_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "complex64")


Call = tuple[str, tuple[str, ...]]
"""An MLX callable's dotted name and the argument sources passed to it."""


class ShimError(PlanError):
    """An MLX mapping that does not fit its catalog entry; the message names the entry."""

    def __init__(self, entry: str, message: str):
        super().__init__(entry, f"catalog/overlays/mlx.yaml: {message}")


@dataclass(frozen=True)
class Shim:
    entry: Entry
    mapping: MlxMapping

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def function(self) -> str:
        """Python name of the shim: ``torch.Tensor.add_`` -> ``torch_Tensor_add_``."""
        return self.name.replace(".", "_")

    def fail(self, message: str) -> ShimError:
        return ShimError(self.name, message)

    @cached_property
    def params(self) -> tuple[Param, ...]:
        """The selected overload: ``mapping.overload``, else the first that has every mapped
        parameter and whose required parameters are all mapped."""
        overloads = tuple(s.params for s in self.entry.signatures)
        if not overloads:
            raise self.fail("the catalog entry has no signature")
        if self.mapping.overload is not None:
            if not 0 <= self.mapping.overload < len(overloads):
                raise self.fail(f"overload {self.mapping.overload} out of range (0..{len(overloads) - 1})")
            chosen = overloads[self.mapping.overload]
        else:
            fitting = [o for o in overloads if self._fits(o)]
            if not fitting:
                raise self.fail(f"no signature has exactly the mapped parameters {sorted(self.mapped)} "
                                f"among its required ones: {self.entry.signatures}")
            chosen = fitting[0]
        missing = self.mapped - {p.name for p in chosen}
        if missing:
            raise self.fail(f"parameters {sorted(missing)} are not in the selected signature")
        unmapped = [p.name for p in chosen if _required(p) and p.name not in self.mapped]
        if unmapped:
            raise self.fail(f"required parameters {unmapped} are not mapped")
        return chosen

    def _fits(self, overload: tuple[Param, ...]) -> bool:
        names = {p.name for p in overload}
        return self.mapped <= names and all(p.name in self.mapped for p in overload if _required(p))

    @staticmethod
    def _call_params(call: MlxCall | None) -> frozenset[str]:
        return frozenset(call.args) if call else frozenset()

    @cached_property
    def mapped(self) -> frozenset[str]:
        """Torch parameters whose values reach MLX (or are checked by a translation)."""
        return self.mapping.torch_params | self._call_params(self.mapping.also)

    def default(self, p: Param) -> str | None:
        """Source of ``p``'s default: the catalog's, or the record's where the catalog has ``...``."""
        if p.name in self.mapping.defaults:
            if p.default != "...":
                raise self.fail(f"defaults names {p.name!r}, whose catalog default is {p.default}")
            return repr(self.mapping.defaults[p.name])
        return p.default

    @property
    def signature(self) -> tuple[str, ...]:
        """The shim's parameters: torch's names and literal defaults (lists as tuples), ``UNSET``
        for defaults that are not literals; ``*`` and ``/`` markers included."""
        parts: list[str] = []
        kinds = [p.kind for p in self.params]
        for i, p in enumerate(self.params):
            if p.kind == P.KEYWORD_ONLY and P.VAR_POSITIONAL not in kinds and P.KEYWORD_ONLY not in kinds[:i]:
                parts.append("*")
            prefix = "*" if p.kind == P.VAR_POSITIONAL else "**" if p.kind == P.VAR_KEYWORD else ""
            default = self.default(p)
            parts.append(prefix + p.name + ("" if default is None else "=" + _default_source(default)))
            if p.kind == P.POSITIONAL_ONLY and (i + 1 == len(kinds) or kinds[i + 1] != P.POSITIONAL_ONLY):
                parts.append("/")
        return tuple(parts)

    @property
    def def_line(self) -> str:
        return _wrap(f"def {self.function}(", self.signature, "):", indent=0)

    @property
    def refusals(self) -> tuple[tuple[str, str], ...]:
        """``(condition, parameter)``: a torch argument left at a value MLX cannot honour."""
        out = []
        for p in self.params:
            if p.name in self.mapped:
                continue
            default = self.default(p) or ""
            if p.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
                out.append((p.name, p.name))
            elif not _is_literal(default):
                out.append((f"{p.name} is not _b.UNSET", p.name))
            elif default in ("None", "True", "False"):
                out.append((f"{p.name} is not {default}", p.name))
            else:
                out.append((f"{p.name} != {_default_source(default)}", p.name))
        return tuple(out)

    @cached_property
    def tensor_params(self) -> tuple[str, ...]:
        """Mapped parameters that may hold tensors (annotation mentions Tensor, is Any or missing)."""
        return tuple(
            p.name for p in self.params
            if p.name in self.mapped and p.name not in self.mapping.values
            and (p.annotation is None or "Tensor" in p.annotation or p.annotation == "Any")
        )

    @property
    def first_tensor(self) -> str:
        """The tensor input that sets dtype checks, casts and translations (``dtype_of`` or the first)."""
        if self.mapping.dtype_of is not None:
            if self.mapping.dtype_of not in self.tensor_params:
                raise self.fail(f"dtype_of {self.mapping.dtype_of!r} is not a mapped tensor parameter")
            return self.mapping.dtype_of
        if not self.tensor_params:
            raise self.fail("no tensor parameter is mapped")
        return self.tensor_params[0]

    @property
    def promoted(self) -> tuple[str, str] | None:
        promote = self.mapping.promote
        if not promote:
            return None
        if len(promote) != 2 or not set(promote) <= set(self.tensor_params):
            raise self.fail(f"promote must name two mapped tensor parameters, got {promote}")
        return promote[0], promote[1]

    @property
    def conversions(self) -> tuple[tuple[str, str], ...]:
        """``(local, expression)`` computing each MLX argument from the torch arguments."""
        out = []
        dtype = "_mlx_common" if self.promoted else None
        for name in self.tensor_params:
            cast = f", {dtype}" if dtype and name in self.mapping.promote else ""
            out.append((f"_x_{name}", f"_b.arg({name}{cast})"))
        input_cast = self.mapping.input_cast
        if input_cast is not None:
            param, kind = input_cast
            first = f"_x_{self.first_tensor}"
            flag = ", accumulate=True" if kind == "accumulate" else ""
            out.append((first, f"_b.cast_input({first}, {param}{flag})"))
        for param, kind in self.mapping.values.items():
            if kind not in INPUT_CASTS:
                out.append((f"_x_{param}", f"_b.translate_{kind}({param}, {self.first_tensor})"))
        return tuple(out)

    def _call(self, mlx: str, args: Mapping[str, str | int], fixed: Mapping[str, object]) -> Call:
        params = {p.name for p in self.params}
        unknown = set(args) - params
        if unknown:
            raise self.fail(f"mapped parameters {sorted(unknown)} are not in the selected signature")
        positions = sorted((v, k) for k, v in args.items() if isinstance(v, int))
        if [v for v, _ in positions] != list(range(len(positions))):
            raise self.fail(f"positions {[v for v, _ in positions]} must be 0..n-1")
        local = {k: (f"_x_{k}" if k in self.tensor_params or k in self.mapping.values else k) for k in args}
        pieces = [local[k] for _, k in positions]
        pieces += [f"{v}={local[k]}" for k, v in args.items() if isinstance(v, str)]
        pieces += [f"{k}={v!r}" for k, v in fixed.items()]
        if self.mapping.stream == "cpu":
            pieces.append("stream=mlx.core.cpu")
        return mlx, tuple(pieces)

    @property
    def call(self) -> str:
        """The statement calling MLX (inside the shim's ``try``, indented 8)."""
        mlx, pieces = self._call(self.mapping.mlx, self.mapping.args, self.mapping.fixed)
        return _wrap(f"_mlx_result = {mlx}(", pieces, ")", indent=8)

    @property
    def also_call(self) -> str | None:
        also = self.mapping.also
        if also is None:
            return None
        mlx, pieces = self._call(also.mlx, also.args, also.fixed)
        return _wrap(f"_mlx_also = {mlx}(", pieces, ")", indent=8)

    @property
    def outputs(self) -> tuple[tuple[str, str], ...]:
        """``(local, expression)`` converting the MLX result(s) to torch."""
        m = self.mapping
        if m.result_type == "bool":
            return (("_mlx_out", "bool(_mlx_result.item())"),)
        if m.also is not None:
            return (("_mlx_out", _to_torch("_mlx_result", m.cast)), ("_mlx_out2", _to_torch("_mlx_also", m.also.cast)))
        if m.result_type in ("tuple", "return_types"):
            return (("_mlx_out", f"tuple({_to_torch('_mlx_item', m.cast)} for _mlx_item in _mlx_result)"),)
        return (("_mlx_out", _to_torch("_mlx_result", m.cast)),)

    @property
    def result(self) -> str:
        """The returned expression, built from the locals of :attr:`outputs`."""
        m = self.mapping
        value = "(_mlx_out, _mlx_out2)" if m.also is not None else "_mlx_out"
        return f"torch.return_types.{m.returns}({value})" if m.result_type == "return_types" else value

    @property
    def inplace_target(self) -> str | None:
        return self.tensor_params[0] if self.mapping.inplace else None

    @property
    def opinfo_names(self) -> tuple[str, ...]:
        """OpInfo names whose samples test the shim: the record's ``opinfo`` ('' for none), else the
        entry's name below ``torch`` / ``torch.Tensor``, in-place underscore dropped."""
        if self.mapping.opinfo is not None:
            return (self.mapping.opinfo,) if self.mapping.opinfo else ()
        name = self.name.removeprefix("torch.").removeprefix("Tensor.")
        if self.mapping.inplace and name.endswith("_") and not name.endswith("__"):
            name = name[:-1]
        return (name,)

    @property
    def sample_dtypes(self) -> tuple[str, ...]:
        """The dtypes the generated test samples: one per dtype family the record claims."""
        sample = {"float": ("float32", "bfloat16"), "float32": ("float32",), "int": ("int64",), "bool": ("bool",),
                  "complex": ("complex64",)}
        return tuple(d for f in self.mapping.dtypes for d in sample[f])

    def validate(self) -> None:
        """Raise ShimError for a record that cannot produce a working shim."""
        m = self.mapping
        for dtype in (m.cast, m.also.cast if m.also else None):
            if dtype is not None and dtype not in TORCH_DTYPES:
                raise self.fail(f"cast {dtype!r} is not one of {TORCH_DTYPES}")
        if m.result_type == "bool" and m.also is not None:
            raise self.fail("a bool result has one output")
        if m.inplace and m.result_type != "tensor":
            raise self.fail("an in-place variant returns its input tensor")
        passed = self.mapped - set(m.ignore)
        opaque = [p.name for p in self.params if p.name in passed and not _is_literal(self.default(p) or "None")]
        if opaque:
            raise self.fail(f"mapped parameters {opaque} have no literal default in the catalog: give it in `defaults`")
        unknown = set(m.defaults) - {p.name for p in self.params}
        if unknown:
            raise self.fail(f"defaults name parameters {sorted(unknown)} that are not in the selected signature")
        _ = self.call, self.also_call, self.conversions, self.promoted, self.first_tensor


def _required(p: Param) -> bool:
    return p.default is None and p.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)


def _to_torch(local: str, cast: str | None) -> str:
    dtype = f", torch.{cast}" if cast else ""
    return f"_b.to_torch({local}, _mlx_device{dtype})"


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
