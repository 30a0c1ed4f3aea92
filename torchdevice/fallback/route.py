"""Running one aten call elsewhere than its target: on the CPU or through an MLX shim.

Calls arrive as the dispatcher hands them to a backend kernel: an :class:`~torch._ops.OpOverload`,
its positional and keyword arguments (tensors, lists of tensors, scalars, devices...), below
autograd (or above it, for a call run whole with its gradients). The result must be what the target's own
kernel would have returned.

The CPU route is :func:`torchdevice.device.host_call.call` with the way :class:`Copied`: every tensor copied to the
CPU (always a copy, as it is across devices), device arguments naming the target the CPU (factories), the arguments
it writes written back, the arguments it returns the caller's own, new results moved to the target (hosted in the
dtypes the target cannot hold: ``float64`` on MPS). The MLX route runs the op's shim once torch has checked the call
(:mod:`~torchdevice.fallback.validate`) and gives its results the same way (:func:`result`: a result the schema
declares an alias of an argument is the caller's own tensor, written first where the shim computed a new one).

Aten arguments and results are walked, and schemas read, with :mod:`torchdevice.device.aten`.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.device import host_call
from torchdevice.device.aten import OpSchema, tree_map, true_device
from torchdevice.device.host_call import CPU, Way
from torchdevice.device.placement import HOST_RESULTS
from torchdevice.device.target import Target
from torchdevice.fallback import validate


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
            host_call.write_back(original, v)


def result(schema: OpSchema, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any], target: Target) -> Any:
    """``value`` (computed elsewhere) as the target's kernel returns it (see the module docstring)."""
    aliases = schema.aliases
    host_at = HOST_RESULTS.get(schema.op._opname)  # a packed sequence's batch sizes: a host tensor on every device
    place = Copied(target).place
    if host_at is None and not any(a is not None for a in aliases):
        return tree_map(place, value)
    values = value if len(aliases) > 1 else (value,)
    out = [
        (args[a] if isinstance(a, int) else kwargs[a]) if a is not None else v if i == host_at else
        tree_map(place, v)
        for i, (a, v) in enumerate(zip(aliases, values, strict=True))
    ]
    return tuple(out) if len(aliases) > 1 else out[0]


class Copied(Way):
    """The CPU route's way to the host: every tensor copied there (differentiably: the engine also runs a call whole
    with its gradients), new results moved to the target."""

    def __init__(self, target: Target) -> None:
        super().__init__()
        self.hosting, self.devices, self.device = target.hosting, (target.device.type,), target.device

    def tensor(self, x: torch.Tensor) -> torch.Tensor:
        copy = x.to(CPU, copy=True)
        self.copies.append((x, copy))
        self.own[id(copy)] = x
        return copy

    def to_device(self, x: torch.Tensor) -> torch.Tensor:
        return x if true_device(x) == self.device else x.to(self.device)


def on_cpu(schema: OpSchema, args: tuple[Any, ...], kwargs: dict[str, Any], target: Target) -> Any:
    """Run the call on CPU copies of its arguments; write back and return as the target would."""
    return host_call.call(schema.op, args, kwargs, Copied(target))


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
