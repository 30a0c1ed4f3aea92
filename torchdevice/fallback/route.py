"""Running one aten call elsewhere than its target: on the CPU or through an MLX shim.

Calls arrive as the dispatcher hands them to a backend kernel: an :class:`~torch._ops.OpOverload`,
its positional and keyword arguments (tensors, lists of tensors, scalars, devices...), below
autograd. The result must be what the target's own kernel would have returned:

- arguments are copied to the CPU (always a copy, as it is across devices); device arguments naming
  the target become the CPU (factories);
- every argument the schema marks as written (``Tensor(a!)``: in-place ops, ``out=``, lists of
  tensors) is written back into the caller's tensors, resized first when an ``out=`` tensor had
  another shape;
- a result the schema declares as an alias of an argument (``add_``, ``out=``) is the caller's own
  tensor (the dispatcher hands the caller that argument anyway, so ``y is x.add_(1)`` holds; returning
  it spares copying the computed copy to the target for nothing); other tensors go to the target
  device, except dtypes the target cannot hold (``float64`` on MPS), which stay on the CPU;
- the result keeps its structure (tensor, tuple, list); the Python binding above the dispatcher
  then builds ``torch.return_types`` and ``PackedSequence`` exactly as for a native kernel.

Aten arguments and results are walked with :mod:`torchdevice.runtime.aten_tree`.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import torch

from torchdevice.fallback import validate
from torchdevice.runtime.aten_tree import tensors, tree_map

if TYPE_CHECKING:
    from torchdevice.fallback.target import Target

CPU = torch.device("cpu")
_NUMBERS = (bool, int, float, complex)


@dataclass(frozen=True)
class RoutedOp:
    """What running ``op`` elsewhere needs from its schema, read once, on first use."""

    op: torch._ops.OpOverload

    @cached_property
    def tensor_slots(self) -> tuple[int, ...]:
        """Positions of plain ``Tensor`` parameters (Python numbers there are wrapped numbers)."""
        params = self.op._schema.arguments
        return tuple(i for i, a in enumerate(params) if not a.kwarg_only and isinstance(a.type, torch._C.TensorType))

    @cached_property
    def _written(self) -> dict[frozenset[str], int | str]:
        """Alias set -> position (keyword name for keyword-only) of each argument the op writes to."""
        return {
            frozenset(a.alias_info.before_set): (a.name if a.kwarg_only else i)
            for i, a in enumerate(self.op._schema.arguments) if a.alias_info is not None and a.alias_info.is_write
        }

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The schema's parameter names as the shims take them (Python keywords renamed: ``from_``)."""
        return tuple(f"{a.name}_" if keyword.iskeyword(a.name) else a.name for a in self.op._schema.arguments)

    @cached_property
    def outputs(self) -> frozenset[str]:
        """Keyword-only arguments the op writes to (``out=``): no input of the computation."""
        return frozenset(name for name, a in zip(self.names, self.op._schema.arguments, strict=True)
                         if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write)

    def inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's input arguments by name, as a shim takes them (those the dispatcher left out keep
        the shim's defaults, which are the schema's)."""
        bound = dict(zip(self.names, args, strict=False))  # the positional ones come first
        bound.update((f"{k}_" if keyword.iskeyword(k) else k, v) for k, v in kwargs.items())
        for name in self.outputs:
            bound.pop(name, None)
        return bound

    @property
    def written(self) -> tuple[int | str, ...]:
        """Positions (keyword names for keyword-only) of the arguments the op writes to."""
        return validate.written(self.op)

    @cached_property
    def aliases(self) -> tuple[int | str | None, ...]:
        """Per return: the position (or keyword name) of the argument it aliases, else None."""
        return tuple(
            self._written.get(frozenset(r.alias_info.before_set)) if r.alias_info is not None else None
            for r in self.op._schema.returns
        )

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

    def write_aliased(self, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Write each result that the schema declares an alias of an argument into that argument,
        where ``value`` (computed elsewhere) holds a new tensor there."""
        values = value if len(self.aliases) > 1 else (value,)
        pairs = [(args[a] if isinstance(a, int) else kwargs[a], v) for a, v in zip(self.aliases, values, strict=True)
                 if a is not None]
        for a, (original, v) in zip((a for a in self.aliases if a is not None), pairs, strict=True):
            if isinstance(a, int) and isinstance(v, torch.Tensor) and v.shape != original.shape:
                # an in-place op never resizes its tensor; torch's meta kernels sometimes do (eq_ with a
                # broadcast operand), so this is checked here and the call left to torch's kernel
                raise validate.Rejected(f"{self.op._name}: in-place result of shape {tuple(v.shape)}")
        for original, v in pairs:
            if v is not original:
                _write_back(original, v)

    def result(self, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any], target: Target) -> Any:
        """``value`` (computed elsewhere) as the target's kernel returns it (see the module docstring)."""
        if not any(a is not None for a in self.aliases):
            return tree_map(target.place, value)
        values = value if len(self.aliases) > 1 else (value,)
        out = [
            (args[a] if isinstance(a, int) else kwargs[a]) if a is not None else
            tree_map(target.place, v)
            for a, v in zip(self.aliases, values, strict=True)
        ]
        return tuple(out) if len(self.aliases) > 1 else out[0]


def on_cpu(routed: RoutedOp, args: tuple[Any, ...], kwargs: dict[str, Any], target: Target) -> Any:
    """Run the call on CPU copies of its arguments; write back and return as the target would."""
    device_type = target.device.type
    moved_args = tree_map(_to_cpu, args, device_type)
    moved_kwargs = {k: tree_map(_to_cpu, v, device_type) for k, v in kwargs.items()}
    value = routed.op(*moved_args, **moved_kwargs)
    for where in routed.written:
        if isinstance(where, int) and where < len(args):
            original, moved = args[where], moved_args[where]
        elif isinstance(where, str) and where in kwargs:
            original, moved = kwargs[where], moved_kwargs[where]
        else:
            continue
        for o, m in zip(tensors(original), tensors(moved), strict=True):
            _write_back(o, m)
    return routed.result(value, args, kwargs, target)


def on_mlx(shim: Callable[..., Any], routed: RoutedOp, args: tuple[Any, ...], kwargs: dict[str, Any],
           target: Target) -> Any:
    """Run the call through its MLX shim (below autograd: the inputs' graph is autograd's business)
    once torch has checked it (:mod:`~torchdevice.fallback.validate`: a call torch rejects is left
    to torch's kernel); the result gets torch's dtypes, one of another shape is refused, and an
    in-place or ``out=`` result the shim computed as a new tensor is written into its argument."""
    expected = validate.expect(routed.op, args, kwargs)
    with torch.no_grad():
        value = validate.conform(routed.op._name, shim(**routed.inputs(args, kwargs)), expected)
        routed.write_aliased(value, args, kwargs)
    return routed.result(value, args, kwargs, target)


def _to_cpu(x: Any, device_type: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(CPU, copy=True)
    if isinstance(x, torch.device) and x.type == device_type:
        return CPU
    return x


def _write_back(original: torch.Tensor, computed: torch.Tensor) -> None:
    if original.shape != computed.shape:
        original.resize_(computed.shape)
    original.copy_(computed)
