"""Aten calls as the dispatcher hands them to kernels: walking their arguments and results, finding an overload
by name, what an overload's schema says (:class:`OpSchema`: which arguments it writes, which results alias
them, where Python numbers stand for tensors), a tensor's device as torch's C++ knows it (:func:`cpp_device`), the
kernel a kernel registered over another calls (:func:`kernel_below`), and the in-place overload an ``out=self`` call
stands for (:func:`in_place_of_out`).

The walkers handle nested lists and tuples (named ones included) of tensors and scalars, and keyword
dictionaries; ``torch.utils._pytree`` handles any structure, at ten times the cost per call, and the fallback
routes, hosted tensors and the simulated device walk every call they run.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, Generic, TypeVar

import torch

_NUMBERS = (bool, int, float, complex)

cpp_device: Callable[[torch.Tensor], torch.device] = vars(torch._C.TensorBase)["device"].__get__
"""A tensor's device as torch's C++ knows it, whatever ``Tensor.device`` shows the program (the simulated Mac's
device tensors say ``mps:0``)."""

cpp_storage_device: Callable[[torch.UntypedStorage], torch.device] = vars(torch._C.StorageBase)["device"].__get__
"""A storage's device as torch's C++ knows it (see :data:`cpp_device`)."""


def true_device(t: torch.Tensor) -> torch.device:
    """``t.device`` as torch's own code is told it. torchdevice's code asks this: ``t.device`` answers the code that
    called into torchdevice (:mod:`torchdevice.callers`); a subclass's own ``device`` (FakeTensor's) is its answer."""
    return cpp_device(t) if type(t).device is vars(torch.Tensor).get("device") else t.device


def tree_map(fn: Callable[..., Any], value: Any, *extra: Any) -> Any:
    """``value`` with each leaf ``x`` (anything but a list or tuple) replaced by ``fn(x, *extra)``, in
    containers of the same types (lists, tuples, ``torch.Size``, ``torch.return_types``, named tuples such
    as ``PackedSequence``)."""
    if isinstance(value, (list, tuple)):
        items = [tree_map(fn, v, *extra) for v in value]
        kind = type(value)
        if kind is list:
            return items
        return kind._make(items) if hasattr(kind, "_make") else kind(items)
    return fn(value, *extra)


def leaves(value: Any) -> list[Any]:
    """The leaves of ``value`` (through lists, tuples and dictionaries' values), in order."""
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    return [value]


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, in order."""
    return [x for x in leaves(value) if isinstance(x, torch.Tensor)]


def overload(name: str) -> torch._ops.OpOverload | None:
    """``"aten::cumsum.out"`` or ``"cumsum.out"`` (no overload name: the default one) as an OpOverload, if it
    exists."""
    namespace, _, rest = name.rpartition("::")
    op, _, overload_name = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace or "aten"), op), overload_name or "default")
    except AttributeError:
        return None


_Row = TypeVar("_Row")
_Made = TypeVar("_Made")
Kernel = Callable[..., Any]
"""A kernel as torch.library calls one registered ``with_keyset``: ``kernel(keyset, *args, **kwargs)``."""
_COMPOSITE = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
"""The alias keys whose kernels a backend key takes before its fallback."""


def kernel_below(op: torch._ops.OpOverload, key: str, python: Mapping[tuple[str, str], Kernel]) -> Kernel:
    """``op``'s kernel on dispatch ``key``, for a kernel registered over it to call. ``python`` holds the device's
    own Python kernels by ``(overload name, key)`` (a key's fallback under ``("", key)``, which takes the op after the
    keyset): such a kernel is called as itself, since through the dispatcher, while a ``TorchDispatchMode`` is
    active, torch reaches a Python kernel as the newest one registered for its op and key (the caller: it would call
    itself for ever). Any other kernel is called through the dispatcher, boxed."""
    own = python.get((op._name, key))
    if own is not None:
        return own
    fallback = python.get(("", key))
    if fallback is not None and not any(torch._C._dispatch_has_kernel_for_dispatch_key(op._name, k)
                                        for k in (key, *_COMPOSITE)):
        return lambda keyset, *args, **kwargs: fallback(keyset, op, *args, **kwargs)
    native, schema = torch.library.get_kernel(op, key), OpSchema.of(op)
    return lambda keyset, *args, **kwargs: native.call_boxed(keyset, *schema.boxed(args), **kwargs)


def in_place_of_out(op: torch._ops.OpOverload, args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> torch._ops.OpOverload | None:
    """The in-place overload ``X_`` to run for an ``X.out`` call whose ``out=`` is its ``self``: how the composite
    code of ``X_`` (``addr_``, ``abs_``) calls it, where the kernel sees one tensor (C++'s ``&result == &self``) and
    checks it as ``X_`` does; a copy of each would be a fresh output, checked and resized as another tensor."""
    if op._overloadname != "out" or not args or kwargs.get("out") is not args[0]:
        return None
    return _in_place(op)


@cache
def _in_place(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    found = overload(f"{op._opname}_")
    same = found is not None and OpSchema.of(found).names == tuple(n for n in OpSchema.of(op).names if n != "out")
    return found if same else None


class ByOverload(Generic[_Row, _Made]):
    """A generated table's rows by the aten overloads they name (``overloads``; ``skip``: a name that is no
    overload), and what ``make(row, op)`` makes of an overload's rows, made once per overload."""

    def __init__(self, rows: Iterable[_Row], make: Callable[[_Row, torch._ops.OpOverload], _Made],
                 skip: str = "") -> None:
        table: dict[str, list[_Row]] = {}
        for row in rows:
            for name in row.overloads:  # type: ignore[attr-defined]
                if name != skip:
                    table.setdefault(name, []).append(row)
        self.rows = {name: tuple(found) for name, found in table.items()}
        self.make = make
        self._made: dict[torch._ops.OpOverload, tuple[_Made, ...]] = {}

    def of(self, op: torch._ops.OpOverload) -> tuple[_Made, ...]:
        """What ``op``'s rows make (none for most ops: a dictionary look-up)."""
        found = self._made.get(op)
        if found is None:
            found = self._made[op] = tuple(self.make(row, op) for row in self.rows.get(op._name, ()))
        return found

    def names(self) -> tuple[str, ...]:
        """The dispatcher names of the overloads with rows, sorted."""
        return tuple(sorted(self.rows))


@dataclass(frozen=True, eq=False)
class OpSchema:
    """What an aten overload's schema says about its arguments and results, read once, on first use
    (:meth:`of` keeps one per overload)."""

    op: torch._ops.OpOverload

    @staticmethod
    @cache
    def of(op: torch._ops.OpOverload) -> OpSchema:
        return OpSchema(op)

    @cached_property
    def tensor_slots(self) -> tuple[int, ...]:
        """Positions of plain ``Tensor`` parameters (Python numbers there are wrapped numbers)."""
        params = self.op._schema.arguments
        return tuple(i for i, a in enumerate(params) if not a.kwarg_only and isinstance(a.type, torch._C.TensorType))

    @cached_property
    def written(self) -> tuple[int | str, ...]:
        """Positions (keyword names for keyword-only) of the arguments the op writes to."""
        return tuple(a.name if a.kwarg_only else i for i, a in enumerate(self.op._schema.arguments)
                     if a.alias_info is not None and a.alias_info.is_write)

    def written_tensors(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
        """The tensors of a call that the op writes to (in place, ``out=``)."""
        found: list[torch.Tensor] = []
        for where in self.written:
            if isinstance(where, int) and where < len(args):
                found += tensors(args[where])
            elif isinstance(where, str) and where in kwargs:
                found += tensors(kwargs[where])
        return found

    @cached_property
    def aliases(self) -> tuple[int | str | None, ...]:
        """Per return: the position (or keyword name) of the argument it aliases, else None."""
        by_set = {frozenset(a.alias_info.before_set): (a.name if a.kwarg_only else i)
                  for i, a in enumerate(self.op._schema.arguments)
                  if a.alias_info is not None and a.alias_info.is_write}
        return tuple(by_set.get(frozenset(r.alias_info.before_set)) if r.alias_info is not None else None
                     for r in self.op._schema.returns)

    @cached_property
    def _arguments(self) -> dict[str, tuple[int | None, Any]]:
        """Argument name -> (position, or None when keyword-only; default)."""
        return {a.name: (None if a.kwarg_only else i, a.default_value if a.has_default_value() else None)
                for i, a in enumerate(self.op._schema.arguments)}

    def getter(self, name: str) -> Callable[[Sequence[Any], dict[str, Any]], Any]:
        """``(args, kwargs) -> the value of argument name`` as the dispatcher hands a call to a backend kernel (its
        default where the dispatcher left it out)."""
        position, default = self._arguments[name]
        if position is None:
            return lambda args, kwargs: kwargs.get(name, default)
        return lambda args, kwargs: args[position] if position < len(args) else kwargs.get(name, default)

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The schema's parameter names as Python keywords allow (``from`` becomes ``from_``)."""
        return tuple(f"{a.name}_" if keyword.iskeyword(a.name) else a.name for a in self.op._schema.arguments)

    @cached_property
    def outputs(self) -> frozenset[str]:
        """Keyword-only arguments the op writes to (``out=``): no input of the computation."""
        return frozenset(name for name, a in zip(self.names, self.op._schema.arguments, strict=True)
                         if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write)

    def boxed(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """``args`` for a boxed kernel call: Python numbers in ``Tensor`` slots become 0-d tensors.

        The Python binding passes wrapped numbers (``x * 2``) to Python kernels as numbers, which a
        boxed call refuses. The 0-d tensor takes the dtype the operation computes in, so the result
        dtype is the one the wrapped number gives.
        """
        if not any(i < len(args) and isinstance(args[i], _NUMBERS) for i in self.tensor_slots):
            return args
        reference = next((a for a in args if isinstance(a, torch.Tensor)), None)
        out = list(args)
        for i in self.tensor_slots:
            if i < len(out) and isinstance(out[i], _NUMBERS):
                dtype = torch.result_type(reference, out[i]) if reference is not None else None
                out[i] = torch.tensor(out[i], dtype=dtype)
        return tuple(out)
