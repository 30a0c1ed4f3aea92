"""What a call did, and whether two calls did the same: the comparisons of the consistency suites.

An :class:`Outcome` is a call's result (or the exception it raised), its arguments after the call
(what in-place and ``out=`` calls wrote) and which of its results are its own arguments.
:func:`assert_same` requires the same exception (type and message), or the same result type, dtype,
shape and values within the result dtype's tolerance (:data:`TOLERANCES`), the same arguments
afterwards and the same aliasing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import _pytree as pytree

TOLERANCES = {  # (rtol, atol) per result dtype; other dtypes (integers, bool) compare exactly
    # Compared results come from different kernels (MLX and torch: summation orders, approximations of
    # transcendental functions, vector widths by CPU), so they differ by rounding, never bit for bit.
    # float32 and complex64: 1e-5 (~80 ulps) covers reductions of hundreds of terms, where torch's own
    # default (1.3e-6, same kernel) would not; a wrong kernel is off by far more.
    torch.float32: (1e-5, 1e-5),
    torch.complex64: (1e-5, 1e-5),
    # float64 and complex128: torch's defaults (~450 ulps), for the same reasons.
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
    # float16: two ulps (2^-10 ~ 9.8e-4 relative at most each), as for bfloat16: a reduction computed
    # in float32 and rounded once (the MLX route's opmath) differs from torch's by up to one rounding of
    # each side (huber_loss's mean measured 1.4e-3); atol one ulp, for results near zero computed from
    # operands of magnitude ~1.
    torch.float16: (2e-3, 1e-3),
    torch.complex32: (2e-3, 1e-3),
    # bfloat16: two ulps (2^-7 ~ 7.8e-3 relative at most each), torch's default rtol.
    torch.bfloat16: (1.6e-2, 1e-2),
}


def clone(value: Any) -> Any:
    """A deep copy of the tensors in a sample, so each side gets fresh inputs."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(clone(v) for v in value)
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    return value


def compare(actual: Any, expected: Any, tolerance: float | None) -> None:
    """Same result type, dtype, shape and values (within the result dtype's tolerance)."""
    assert type(actual) is type(expected), f"result type {type(actual).__name__}, torch gives {type(expected).__name__}"
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected, strict=True):
            compare(a, e, tolerance)
        return
    dtype = expected.dtype if isinstance(expected, torch.Tensor) else None
    rtol, atol = (tolerance, tolerance) if tolerance is not None else TOLERANCES.get(dtype, (0.0, 0.0))
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


def tensors(values: Any) -> list[torch.Tensor]:
    return [v for v in pytree.tree_leaves(values) if isinstance(v, torch.Tensor)]


@dataclass(frozen=True)
class Outcome:
    """What a call did: its result or the exception it raised, its arguments after the call, and for each
    result (each element of a tuple or list result) whether it is one of those arguments."""

    result: Any
    after: tuple[Any, ...]
    aliases: tuple[bool, ...]

    def on_host(self) -> Outcome:
        """The same outcome with its tensors copied to the CPU (``Tensor.cpu()``), for comparisons of a
        device's outcome with the CPU's."""
        def host(value: Any) -> Any:
            return value.cpu() if isinstance(value, torch.Tensor) else value

        result = self.result if isinstance(self.result, Exception) else map_leaves(self.result, host)
        return Outcome(result, map_leaves(self.after, host), self.aliases)


def map_leaves(value: Any, fn: Callable[[Any], Any]) -> Any:
    """``value`` with ``fn`` applied to each item that is not a container (a tensor, a number...), its
    containers rebuilt with their own types (lists, tuples, named tuples, ``torch.Size``,
    ``torch.return_types``, dictionaries)."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(map_leaves(v, fn) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)([map_leaves(v, fn) for v in value])
    if isinstance(value, dict):
        return {k: map_leaves(v, fn) for k, v in value.items()}
    return fn(value)


def outcome(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Outcome:
    """What ``fn(*args, **kwargs)`` does with these very arguments (warnings silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            result = exc
    after = (*args, *kwargs.values())
    results = result if isinstance(result, (tuple, list)) else (result,)
    return Outcome(result, after, tuple(any(r is a for a in after) for r in results))


@dataclass
class Call:
    """One call: ``fn(*args, **kwargs)``; ``native``: its outcome without the route under test, once known."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    native: Outcome | None = None

    def run(self) -> Outcome:
        """The outcome on fresh copies of the arguments."""
        return outcome(self.fn, clone(self.args), clone(self.kwargs))


def assert_same(actual: Outcome, expected: Outcome, device: str | None = None) -> None:
    """The call under test did what the native call did: the same exception (type and message), or the
    same result (:func:`compare`) with the same arguments afterwards (in-place and ``out=`` writes) and
    the same aliasing. ``device``: the device the call under test ran on, whose name the tensors printed
    in its exception's message carry (``device='mps:0'``), where the native ones print none."""
    result, native = actual.result, expected.result
    if isinstance(native, Exception) or isinstance(result, Exception):
        message = str(result).replace(f", device='{device}'", "") if device else str(result)
        assert (type(result), message) == (type(native), str(native)), (
            f"got {type(result).__name__}: {result}; native: {type(native).__name__}: {native}")
        return
    compare(result, native, None)
    compare(tensors(actual.after), tensors(expected.after), None)
    assert actual.aliases == expected.aliases, "returns another tensor than torch"
