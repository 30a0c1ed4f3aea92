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
  device, except dtypes the target cannot hold (``float64`` on MPS), which come back hosted (device tensors
  whose data the host keeps);
- the result keeps its structure (tensor, tuple, list); the Python binding above the dispatcher
  then builds ``torch.return_types`` and ``PackedSequence`` exactly as for a native kernel.

Aten arguments and results are walked, and schemas read, with :mod:`torchdevice.device.aten`.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.device.aten import OpSchema, in_place_of_out, tensors, tree_map
from torchdevice.device.placement import HOST_RESULTS
from torchdevice.device.target import Target
from torchdevice.fallback import validate

CPU = torch.device("cpu")


def inputs(schema: OpSchema, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's input arguments by name, as a shim takes them (those the dispatcher left out keep the shim's
    defaults, which are the schema's)."""
    bound = dict(zip(schema.names, args, strict=False))  # the positional ones come first
    bound.update((f"{k}_" if keyword.iskeyword(k) else k, v) for k, v in kwargs.items())
    for name in schema.outputs:
        bound.pop(name, None)
    return bound


def write_aliased(schema: OpSchema, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Write each result that the schema declares an alias of an argument into that argument, where ``value``
    (computed elsewhere) holds a new tensor there."""
    aliases = schema.aliases
    values = value if len(aliases) > 1 else (value,)
    pairs = [(args[a] if isinstance(a, int) else kwargs[a], v) for a, v in zip(aliases, values, strict=True)
             if a is not None]
    for a, (original, v) in zip((a for a in aliases if a is not None), pairs, strict=True):
        if isinstance(a, int) and isinstance(v, torch.Tensor) and v.shape != original.shape:
            # an in-place op never resizes its tensor; torch's meta kernels sometimes do (eq_ with a
            # broadcast operand), so this is checked here and the call left to torch's kernel
            raise validate.Rejected(f"{schema.op._name}: in-place result of shape {tuple(v.shape)}")
    for original, v in pairs:
        if v is not original:
            _write_back(original, v)


def result(schema: OpSchema, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any], target: Target) -> Any:
    """``value`` (computed elsewhere) as the target's kernel returns it (see the module docstring)."""
    aliases = schema.aliases
    host_at = HOST_RESULTS.get(schema.op._opname)  # a packed sequence's batch sizes: a host tensor on every device
    if host_at is None and not any(a is not None for a in aliases):
        return tree_map(target.place, value)
    values = value if len(aliases) > 1 else (value,)
    out = [
        (args[a] if isinstance(a, int) else kwargs[a]) if a is not None else v if i == host_at else
        tree_map(target.place, v)
        for i, (a, v) in enumerate(zip(aliases, values, strict=True))
    ]
    return tuple(out) if len(aliases) > 1 else out[0]


def on_cpu(schema: OpSchema, args: tuple[Any, ...], kwargs: dict[str, Any], target: Target) -> Any:
    """Run the call on CPU copies of its arguments; write back and return as the target would."""
    in_place = in_place_of_out(schema.op, args, kwargs)
    if in_place is not None:
        schema, kwargs = OpSchema.of(in_place), {k: v for k, v in kwargs.items() if k != "out"}
    device_type = target.device.type
    moved_args = tree_map(_to_cpu, args, device_type)
    moved_kwargs = {k: tree_map(_to_cpu, v, device_type) for k, v in kwargs.items()}
    value = schema.op(*moved_args, **moved_kwargs)
    for where in schema.written:
        if isinstance(where, int) and where < len(args):
            original, moved = args[where], moved_args[where]
        elif isinstance(where, str) and where in kwargs:
            original, moved = kwargs[where], moved_kwargs[where]
        else:
            continue
        for o, m in zip(tensors(original), tensors(moved), strict=True):
            _write_back(o, m)
    return result(schema, value, args, kwargs, target)


def on_mlx(shim: Callable[..., Any], schema: OpSchema, args: tuple[Any, ...], kwargs: dict[str, Any],
           target: Target) -> Any:
    """Run the call through its MLX shim (below autograd: the inputs' graph is autograd's business)
    once torch has checked it (:mod:`~torchdevice.fallback.validate`: a call torch rejects is left
    to torch's kernel); the result gets torch's dtypes, one of another shape is refused, and an
    in-place or ``out=`` result the shim computed as a new tensor is written into its argument."""
    expected = validate.expect(schema.op, args, kwargs)
    with torch.no_grad():
        value = validate.conform(schema.op._name, shim(**inputs(schema, args, kwargs)), expected)
        write_aliased(schema, value, args, kwargs)
    return result(schema, value, args, kwargs, target)


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
