"""Inputs and checks of the MLX per-op tests.

Samples come from PyTorch's OpInfo database where an OpInfo of the entry's name (or alias) has
samples the mapping supports, else from a named recipe of the entry's MLX overlay record. A check
compares the shim with torch on each sample, up to ``MAX_COMPARED`` samples per dtype, and fails
when no sample of some dtype ran on MLX.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import torch
from torch.testing._internal.common_methods_invocations import op_db

from torchdevice.fallback.mlx_bridge import MlxUnsupported

MAX_COMPARED = 3  # samples compared for the first dtype of an entry
MAX_COMPARED_MORE = 1  # ... and for each further dtype
MAX_TRIED = 40
TOLERANCES = {  # (rtol, atol) per result dtype; other dtypes (integers, bool) compare exactly
    # MLX and torch run different kernels (summation orders, approximations of transcendental
    # functions, vector widths by CPU), so results differ by rounding, never bit for bit. float32 and
    # complex64: 1e-5 (~80 ulps) covers reductions of hundreds of terms, where torch's own default
    # (1.3e-6, same kernel) would not; a wrong kernel is off by far more.
    torch.float32: (1e-5, 1e-5),
    torch.complex64: (1e-5, 1e-5),
    # float16: two ulps (2^-10 ~ 9.8e-4 relative at most each), as for bfloat16: a reduction MLX computes
    # in float32 and rounds once (the route's opmath) differs from torch's by up to one rounding of each
    # side (huber_loss's mean measured 1.4e-3); atol one ulp, for results near zero computed from
    # operands of magnitude ~1.
    torch.float16: (2e-3, 1e-3),
    # bfloat16: two ulps (2^-7 ~ 7.8e-3 relative at most each), torch's default rtol.
    torch.bfloat16: (1.6e-2, 1e-2),
}
Sample = tuple[tuple[Any, ...], dict[str, Any]]


@cache
def opinfos() -> dict[str, list[Any]]:
    """OpInfo name or alias -> OpInfos (all variants)."""
    out: dict[str, list[Any]] = {}
    for op in op_db:
        for name in (op.name, *(a.name for a in op.aliases)):
            out.setdefault(name, []).append(op)
    return out


def opinfo_samples(names: tuple[str, ...], dtype: torch.dtype) -> Iterator[Sample]:
    for name in names:
        for op in opinfos().get(name, []):
            if dtype not in op.supported_dtypes("cpu"):
                continue
            # sample_inputs_func directly: OpInfo.sample_inputs inspects the call stack on every call
            for s in op.sample_inputs_func(op, "cpu", dtype, False):
                yield (s.input, *s.args), dict(s.kwargs)


def make(*shape: int, dtype: torch.dtype, low: int = -9, high: int = 10) -> torch.Tensor:
    """Random values of ``dtype``: standard normal floats, integers in [low, high), bools."""
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    return torch.randint(low, high, shape, dtype=dtype)


RECIPES: dict[str, Callable[[torch.dtype], list[Sample]]] = {
    "unary": lambda d: [((make(4, 5, dtype=d),), {}), ((make(3, 2, 4, dtype=d),), {})],
    "reduction": lambda d: [((make(3, 4, 5, dtype=d), 1), {}), ((make(3, 4, 5, dtype=d), -1, True), {})],
    "square": lambda d: [((make(4, 4, dtype=d) + 4 * torch.eye(4, dtype=d),), {})],  # well conditioned
    "indices_table": lambda d: [((make(2, 3, dtype=torch.int64, low=0, high=10), make(10, 4, dtype=d)), {})],
}
"""Named input recipes: a function of the sample dtype giving ``(args, kwargs)`` samples."""


def samples(opinfo: tuple[str, ...], recipe: str | None, dtype: torch.dtype) -> Iterator[Sample]:
    yield from opinfo_samples(opinfo, dtype)
    if recipe is not None:
        yield from RECIPES[recipe](dtype)


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


def check(shim: Callable[..., Any], reference: Callable[..., Any], *, opinfo: tuple[str, ...],
          recipe: str | None, dtypes: tuple[str, ...], tolerance: float | None, inplace: bool) -> None:
    """Run ``shim`` and ``reference`` on the same samples and compare; for each dtype, at least one
    sample must run on MLX."""
    torch.manual_seed(0)
    signature = inspect.signature(shim)
    for i, dtype in enumerate(dtypes):
        compared = tried = 0
        for args, kwargs in samples(opinfo, recipe, getattr(torch, dtype)):
            if compared == (MAX_COMPARED_MORE if i else MAX_COMPARED) or tried == MAX_TRIED:
                break
            try:
                signature.bind(*args, **kwargs)
            except TypeError:
                continue  # a call form of another overload
            tried += 1
            torch_args, torch_kwargs = clone(args), clone(kwargs)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # deprecations of the reference (torch.qr...)
                    expected = reference(*torch_args, **torch_kwargs)
            except (RuntimeError, ValueError, TypeError, IndexError, AssertionError):
                continue  # torch rejects this sample (e.g. an in-place op that would broadcast self)
            mlx_args, mlx_kwargs = clone(args), clone(kwargs)
            try:
                actual = shim(*mlx_args, **mlx_kwargs)
            except MlxUnsupported:
                continue
            compare(actual, expected, tolerance)
            if inplace:
                assert actual is mlx_args[0], "an in-place variant must return its input"
            compared += 1
        assert compared, f"no {dtype} sample ran on MLX: each was refused or fits no signature"
