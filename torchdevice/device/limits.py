"""MPS's limits: the calls MPS's kernels refuse for device reasons, and the conditions under which they do.

The table (``torchdevice_generated.limits_table``, from ``catalog/overlays/limits.yaml``) has one row per limit;
this module answers the questions the runtime and the simulated Mac ask of it, per aten overload, on a call's
arguments as the dispatcher hands them to a backend kernel (tensors, lists, Python numbers; tensors may be the
simulated device's: only their shape, dtype, ``requires_grad`` and contiguity are read, never their data):

- :func:`limits_of` ``(op) -> tuple[Limit, ...]``: the limits of an :class:`~torch._ops.OpOverload` (a dictionary
  look-up; most ops have none);
- :meth:`Limit.applies` ``(args, kwargs, macos) -> bool``: whether the Mac refuses this call on that macOS version;
- :meth:`Limit.exception` ``(args, kwargs) -> BaseException``: the exception the Mac raises for it (its type, its
  message formatted as MPS formats it);
- :meth:`Limit.raised` ``(exc) -> bool``: whether ``exc`` is this limit's refusal (the classifier's patterns);
- :meth:`Limit.possible` ``(macos) -> bool``: whether it can apply on that macOS at all;
- :func:`generic` ``() -> tuple[Limit, ...]``: the refusals of any op (a missing kernel, float64...);
- :func:`macos` ``() -> tuple[int, int]``: the macOS version to answer for: ``$TORCHDEVICE_MACOS`` (``14.5``)
  where set, else this Mac's, else :data:`DEFAULT_MACOS`.

A limit whose ``raises`` is ``None`` is a call MPS runs and answers differently (:meth:`Limit.exception` has
nothing to raise for it).
"""

from __future__ import annotations

import logging
import os
import platform
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import torch
from torchdevice_generated.limits_table import LIMITS

from torchdevice.device.aten import ByOverload, OpSchema, cpp_device, leaves, overload
from torchdevice.records.limits import ANY, LimitRow

__all__ = ["ANY", "DEFAULT_MACOS", "MACOS_VARIABLE", "Limit", "generic", "limited", "limits_of", "macos",
           "message_pattern", "table"]

log = logging.getLogger("torchdevice.limits")

DEFAULT_MACOS = (14, 0)
"""The macOS version answered for where there is no Mac and no ``$TORCHDEVICE_MACOS``: the oldest torch 2.13
runs on, so that a simulated Mac refuses everything a supported Mac may refuse."""
MACOS_VARIABLE = "TORCHDEVICE_MACOS"
_VERSION = re.compile(r"\s*(\d+)(?:\.(\d+))?")
EXCEPTIONS: dict[str, type[BaseException]] = {
    "RuntimeError": RuntimeError, "NotImplementedError": NotImplementedError, "TypeError": TypeError,
}
"""The exceptions the table's rows name."""
WIDE = frozenset({torch.float64, torch.complex128})
"""The dtypes MPS has no tensors of."""
C10_NAMES = {
    torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
    torch.float64: "Double", torch.complex32: "ComplexHalf", torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble", torch.uint16: "UInt16", torch.uint32: "UInt32", torch.uint64: "UInt64",
}
"""How c10 prints a ``ScalarType`` in messages (``Long``)."""


def macos() -> tuple[int, int]:
    """The macOS version limits are answered for: ``$TORCHDEVICE_MACOS`` (``15.1``), else this Mac's, else
    :data:`DEFAULT_MACOS`. A malformed variable is warned about once and ignored."""
    text = os.environ.get(MACOS_VARIABLE, "")
    if text:
        match = _VERSION.fullmatch(text)
        if match:
            return int(match[1]), int(match[2] or 0)
        _warn_malformed(text)
    mac = platform.mac_ver()[0]
    match = _VERSION.match(mac) if mac else None
    return (int(match[1]), int(match[2] or 0)) if match else DEFAULT_MACOS


@cache
def _warn_malformed(text: str) -> None:
    log.warning("torchdevice: %s=%r is not a macOS version (such as 14.5); ignored", MACOS_VARIABLE, text)


@dataclass(frozen=True, eq=False)
class Limit:
    """One limit of one overload (or, for a generic refusal, of any op): its row of the table, read against the
    overload's schema."""

    row: LimitRow
    op: torch._ops.OpOverload | None
    """The overload; None for a generic refusal."""

    @property
    def name(self) -> str:
        return self.row.name

    @property
    def why(self) -> str:
        """The short reason reports give (``adaptive pool input size not a multiple of the output size``)."""
        return self.row.why

    @property
    def cuda_runs(self) -> bool:
        return self.row.cuda_runs

    @property
    def routed(self) -> bool:
        """Whether the fallback engine routes calls under this limit (those CUDA runs, where a guard is cheap)."""
        return self.row.cuda_runs and self.row.routed

    @property
    def raises(self) -> type[BaseException] | None:
        """The exception type the Mac raises; None: MPS runs the call and returns other values."""
        return EXCEPTIONS[self.row.raises] if self.row.raises else None

    @cached_property
    def instead(self) -> torch._ops.OpOverload | None:
        """The overload the CPU runs in place of this MPS-only one."""
        return overload(self.row.instead) if self.row.instead else None

    def getter(self, name: str) -> _Getter:
        """``(args, kwargs) -> the value of argument name`` (its default where the dispatcher left it out)."""
        if self.op is None:
            raise KeyError(name)
        return OpSchema.of(self.op).getter(name)

    @cached_property
    def _tests(self) -> tuple[_Test, ...]:
        """The clauses as tests of ``(args, kwargs, macos)``, the macOS ones first (the cheapest)."""
        clauses = sorted(self.row.when, key=lambda clause: clause[0] != "macos_below")
        return tuple(_COMPILE[clause[0]](self, *clause[1:]) for clause in clauses)

    def possible(self, macos: tuple[int, int]) -> bool:
        """Whether the limit can apply at all on macOS ``macos`` (its macOS clauses hold)."""
        return all(tuple(macos) < clause[1] for clause in self.row.when if clause[0] == "macos_below")

    def applies(self, args: Sequence[Any], kwargs: dict[str, Any], macos: tuple[int, int]) -> bool:
        """Whether the Mac, on macOS ``macos``, refuses this call (for a ``raises=None`` limit: answers it
        differently). Arguments that cannot be read as the condition expects (a user error the kernel will
        report) make it False."""
        try:
            for test in self._tests:
                if not test(args, kwargs, macos):
                    return False
            return True
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
            log.debug("limits: %s: %s not evaluated on these arguments (%s)", self.name, self.op, exc)
            return False

    def exception(self, args: Sequence[Any], kwargs: dict[str, Any]) -> BaseException:
        """The exception the Mac raises for this call (its type, its message as MPS formats it)."""
        kind = self.raises
        if kind is None:
            raise ValueError(f"limit {self.name}: MPS runs these calls (and answers differently); nothing is raised")
        return kind("".join(self._piece(p, args, kwargs) for p in self.row.message))

    def _piece(self, piece: str, args: Sequence[Any], kwargs: dict[str, Any]) -> str:
        if not (piece.startswith("{") and piece.endswith("}")):
            return piece
        what = piece[1:-1]
        if what.isdigit():
            return what
        if what == "op":
            return self.op._name if self.op is not None else "aten::<op>"
        if what == "backend":
            return "MPS"
        if what == "commit":
            return torch.version.git_version[:7] if torch.version.git_version else "0000000"
        name, _, attribute = what.partition(".")
        if name == "any":
            value = next((t for t in leaves((args, kwargs)) if isinstance(t, torch.Tensor)), None)
        else:
            value = self.getter(name)(args, kwargs)
        if attribute == "scalar_type" and isinstance(value, torch.Tensor):
            return C10_NAMES.get(value.dtype, str(value.dtype))
        return str(value)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """The message as a pattern (what is inserted matches any text)."""
        return message_pattern(self.row.message)

    def raised(self, exc: BaseException) -> bool:
        """Whether ``exc`` is this limit's refusal: its exception type and its message."""
        kind = self.raises
        return kind is not None and isinstance(exc, kind) and self.pattern.match(str(exc)) is not None

    def __repr__(self) -> str:
        return f"Limit({self.name!r}, {self.op._name if self.op is not None else ANY!r})"


def message_pattern(pieces: Sequence[str], backend: str = "MPS") -> re.Pattern[str]:
    """A message's pieces as a pattern matching its start: what is inserted matches any text, ``{backend}`` a
    dispatch key of ``backend`` (``SparseMPS``)."""
    parts = []
    for piece in pieces:
        inner = piece[1:-1] if piece.startswith("{") and piece.endswith("}") else None
        if inner is None or inner.isdigit():
            parts.append(re.escape(piece if inner is None else inner))
        elif inner == "backend":
            parts.append(rf"\w*{re.escape(backend)}")
        else:
            parts.append(r".+?")
    return re.compile("".join(parts), re.DOTALL)


def backend_patterns(backend: str) -> tuple[tuple[LimitRow, re.Pattern[str]], ...]:
    """The generic refusals' messages as patterns, ``{backend}`` naming ``backend`` (``"CPU"`` on the CPU)."""
    return tuple((row, message_pattern(row.message, backend)) for row in LIMITS
                 if row.overloads == (ANY,) and row.raises)


@cache
def _by_overload() -> ByOverload[LimitRow, Limit]:
    return ByOverload(LIMITS, Limit, skip=ANY)


def limits_of(op: torch._ops.OpOverload) -> tuple[Limit, ...]:
    """The limits of ``op`` (none for most ops)."""
    return _by_overload().of(op)


def limited() -> tuple[str, ...]:
    """The dispatcher names of the overloads with limits, sorted."""
    return _by_overload().names()


@cache
def generic() -> tuple[Limit, ...]:
    """The refusals of any op: a missing kernel, float64 and the other dtypes MPS lacks, sizes."""
    return tuple(Limit(row, None) for row in LIMITS if row.overloads == (ANY,))


def table() -> tuple[LimitRow, ...]:
    """Every row, in the table's order."""
    return LIMITS


# -- the clauses (torchdevice.records.limits.CLAUSES), each compiled once per limit into a test of
# (args, kwargs, macos) -------------------------------------------------------------------------------------------

_Getter = Callable[[Sequence[Any], dict[str, Any]], Any]
_Test = Callable[[Sequence[Any], dict[str, Any], tuple[int, int]], bool]


def _dtypes(names: tuple[str, ...]) -> frozenset[torch.dtype]:
    return frozenset(d for d in (getattr(torch, n, None) for n in names) if isinstance(d, torch.dtype))


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for t in value if isinstance(t, torch.Tensor)]
    return []


def _dtype(limit: Limit, arg: str, names: tuple[str, ...]) -> _Test:
    get, wanted = limit.getter(arg), _dtypes(names)

    def test(args: Any, kwargs: Any, macos: Any) -> bool:
        value = get(args, kwargs)
        if isinstance(value, torch.Tensor):
            return value.dtype in wanted
        return any(t.dtype in wanted for t in _tensors(value))

    return test


def _asks_wide(limit: Limit, arg: str) -> _Test:
    get = limit.getter(arg)
    return lambda args, kwargs, macos: get(args, kwargs) in WIDE


def _any_dtype(limit: Limit, names: tuple[str, ...]) -> _Test:
    wanted = _dtypes(names)
    return lambda args, kwargs, macos: any(
        (isinstance(x, torch.Tensor) and x.dtype in wanted) or (isinstance(x, torch.dtype) and x in wanted)
        for x in leaves((args, kwargs)))


def _any_size_above(limit: Limit, n: int) -> _Test:
    return lambda args, kwargs, macos: any(isinstance(x, torch.Tensor) and any(s > n for s in x.shape)
                                           for x in leaves((args, kwargs)))


def _last_two(value: Any) -> tuple[int, int]:
    sizes = value.shape[-2:] if isinstance(value, torch.Tensor) else value
    h, w = (int(s) for s in sizes)
    return h, w


def _pool_sizes(limit: Limit, input: str, output: str, case: str) -> _Test:
    get_input, get_output = limit.getter(input), limit.getter(output)

    def test(args: Any, kwargs: Any, macos: Any) -> bool:
        (ih, iw), (oh, ow) = _last_two(get_input(args, kwargs)), _last_two(get_output(args, kwargs))
        if min(ih, iw, oh, ow) <= 0:
            return False
        shrinks = ih >= oh and iw >= ow
        mixed = not shrinks and not (ih <= oh and iw <= ow)
        if case == "mixed" or mixed:  # a mixed case is refused as mixed first
            return case == "mixed" and mixed
        shrink_bad = shrinks and bool(ih % oh or iw % ow)
        grow_bad = not shrinks and bool(oh % ih or ow % iw)
        return {"shrink_not_divisible": shrink_bad, "grow_not_divisible": grow_bad,
                "not_divisible": shrink_bad or grow_bad}[case]

    return test


def _dropout_without_grad(limit: Limit, p: str, inputs: tuple[str, ...]) -> _Test:
    get_p, gets = limit.getter(p), tuple(limit.getter(name) for name in inputs)

    def test(args: Any, kwargs: Any, macos: Any) -> bool:
        if not get_p(args, kwargs) > 0:
            return False
        return not (torch.is_grad_enabled()
                    and any(t.requires_grad for get in gets for t in _tensors(get(args, kwargs))))

    return test


def _ndim_above(limit: Limit, arg: str, n: int) -> _Test:
    get = limit.getter(arg)

    def test(args: Any, kwargs: Any, macos: Any) -> bool:
        value = get(args, kwargs)
        return (value.dim() if isinstance(value, torch.Tensor) else len(value)) > n

    return test


def _numel_above(limit: Limit, arg: str, n: int) -> _Test:
    get = limit.getter(arg)
    return lambda args, kwargs, macos: get(args, kwargs).numel() > n


def _empty(limit: Limit, arg: str) -> _Test:
    get = limit.getter(arg)
    return lambda args, kwargs, macos: get(args, kwargs).numel() == 0


def _on_host(limit: Limit, arg: str, expected: bool) -> _Test:
    get = limit.getter(arg)

    def test(args: Any, kwargs: Any, macos: Any) -> bool:
        value = get(args, kwargs)
        if isinstance(value, torch.Tensor):
            return (cpp_device(value).type == "cpu") == expected
        return (value is not None and torch.device(value).type == "cpu") == expected

    return test


def _count_above(limit: Limit, arg: str, n: int) -> _Test:
    get = limit.getter(arg)
    return lambda args, kwargs, macos: sum(
        t.dim() if t.dtype in (torch.bool, torch.uint8) else 1 for t in get(args, kwargs) if t is not None) > n


def _size(limit: Limit, ref: tuple[Any, ...]) -> _Getter:
    """A size reference (``("mat2", 2)``: ``mat2.size(2)``; ``("hx", 0, 2)``: ``hx[0].size(2)``)."""
    get, indices = limit.getter(ref[0]), ref[1:]
    if len(indices) == 1:
        (index,) = indices
        return lambda args, kwargs: get(args, kwargs).shape[index]

    def size(args: Any, kwargs: Any) -> int:
        value = get(args, kwargs)
        for i in indices:
            value = value.shape[i] if isinstance(value, torch.Tensor) else value[i]
        return int(value)

    return size


def _product_above(limit: Limit, refs: tuple[Any, ...], n: int) -> _Test:
    sizes = tuple(_size(limit, ref) for ref in refs)

    def test(args: Any, kwargs: Any, macos: Any) -> bool:
        product = 1
        for size in sizes:
            product *= size(args, kwargs)
        return product > n

    return test


def _size_above(limit: Limit, refs: tuple[Any, ...], n: int) -> _Test:
    sizes = tuple(_size(limit, ref) for ref in refs)
    return lambda args, kwargs, macos: any(size(args, kwargs) > n for size in sizes)


def _sizes_differ(limit: Limit, refs: tuple[Any, ...]) -> _Test:
    sizes = tuple(_size(limit, ref) for ref in refs)
    return lambda args, kwargs, macos: len({size(args, kwargs) for size in sizes}) > 1


def _conv_output_above(limit: Limit, n: int) -> _Test:
    gets = tuple(limit.getter(name) for name in ("input", "weight", "stride", "padding", "dilation"))

    def test(args: Any, kwargs: Any, macos: Any) -> bool:
        input, weight, *per_dim = (get(args, kwargs) for get in gets)
        spatial = input.dim() - 2
        stride, padding, dilation = (_per_dim(value, spatial) for value in per_dim)
        sizes = [input.shape[0], weight.shape[0]]
        for d in range(spatial):
            kernel = dilation[d] * (weight.shape[2 + d] - 1) + 1
            sizes.append((input.shape[2 + d] + 2 * padding[d] - kernel) // stride[d] + 1)
        return any(s > n for s in sizes)

    return test


def _per_dim(value: Any, count: int) -> list[int]:
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    return values * count if len(values) == 1 else values


def _macos_below(limit: Limit, version: tuple[int, int]) -> _Test:
    return lambda args, kwargs, macos: tuple(macos) < version


def _value(limit: Limit, arg: str, test: str, operand: Any) -> _Test:
    get = limit.getter(arg)
    if test == "equals":
        return lambda args, kwargs, macos: bool(get(args, kwargs) == operand)
    if test == "in":
        return lambda args, kwargs, macos: get(args, kwargs) in operand
    return lambda args, kwargs, macos: (value := get(args, kwargs)) is not None and value > operand


def _contiguous(limit: Limit, arg: str, expected: bool) -> _Test:
    get = limit.getter(arg)
    return lambda args, kwargs, macos: get(args, kwargs).is_contiguous() == expected


_COMPILE: dict[str, Callable[..., _Test]] = {
    "dtype": _dtype, "asks_wide": _asks_wide, "any_dtype": _any_dtype, "any_size_above": _any_size_above,
    "pool_sizes": _pool_sizes, "dropout_without_grad": _dropout_without_grad, "ndim_above": _ndim_above,
    "numel_above": _numel_above, "empty": _empty, "on_host": _on_host, "count_above": _count_above,
    "product_above": _product_above,
    "size_above": _size_above, "sizes_differ": _sizes_differ, "conv_output_above": _conv_output_above,
    "macos_below": _macos_below, "value": _value, "contiguous": _contiguous,
}
