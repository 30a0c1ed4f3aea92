"""The fallback engine: one backend kernel per aten overload that may fail on the target.

For each overload that the kernel table, the capability cache or ``prefer_mlx`` names, the engine
registers a kernel under the target's dispatch key (``torch.library.Library("aten", "IMPL")``),
after capturing the kernel it replaces (``torch.library.get_kernel``: the target's own, or its
backend fallback that raises "not currently implemented"). The kernel, per call:

1. looks up the verdict for (op, dtype of the call); unless it says the target fails, calls the
   target's own kernel; an exception that :func:`~torchdevice.device.errors.classify` does not
   call a device-compatibility error propagates untouched (the caller gets the identical object);
   a compatibility error records a verdict (persisted) and falls through to 2;
2. routes the call: through the op's verified MLX shim when it has one (its ``MlxUnsupported``
   means "not these arguments": the CPU then; torch checks the call first, :mod:`~.validate`), else on
   the CPU (:mod:`~torchdevice.fallback.route`),
   and counts it, with the seconds it took there and why, with :func:`torchdevice.reporting.counts.record_fallback`.

With ``prefer_mlx`` every overload with a verified MLX shim is registered and goes to MLX first;
calls whose arguments MLX refuses go on as above. Overloads registered nowhere run the target's
kernels with no added cost.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from torchdevice.device.aten import OpSchema, overload
from torchdevice.device.errors import COMPATIBILITY_ERRORS, classify
from torchdevice.device.target import Target
from torchdevice.fallback import route
from torchdevice.fallback.cache import ANY, CapabilityCache
from torchdevice.fallback.validate import Declined
from torchdevice.reporting.counts import record_fallback

log = logging.getLogger("torchdevice.fallback")

_REFUSED = object()


class _DtypeNames(dict[torch.dtype, str]):
    """``torch.float64`` -> ``"float64"``, computed once per dtype."""

    def __missing__(self, dtype: torch.dtype) -> str:
        self[dtype] = name = str(dtype).removeprefix("torch.")
        return name


_DTYPE_NAMES = _DtypeNames()


def call_dtype(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The dtype a verdict is keyed by: the ``dtype=`` asked for, else the first tensor argument's."""
    asked = kwargs.get("dtype")
    if isinstance(asked, torch.dtype):
        return _DTYPE_NAMES[asked]
    for a in args:
        if isinstance(a, torch.Tensor):
            return _DTYPE_NAMES[a.dtype]
        if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
            return _DTYPE_NAMES[a[0].dtype]
    return "none"


class Engine:
    """Fallback kernels for ``target``, verdicts in ``cache``, MLX shims by aten overload name."""

    def __init__(
        self,
        target: Target,
        cache: CapabilityCache,
        *,
        shims: Mapping[str, Callable[..., Any]] | None = None,
        unsupported: tuple[type[BaseException], ...] = (),
        prefer_mlx: bool = False,
    ) -> None:
        self.target = target
        self.cache = cache
        self.shims = dict(shims or {})
        self.unsupported: tuple[type[BaseException], ...] = (*unsupported, Declined)  # shims', torch's checks'
        self.prefer_mlx = prefer_mlx

    def overloads(self) -> list[str]:
        """The overloads to register: known missing, tried first, learned failing, MLX-preferred."""
        names = set(self.target.missing) | self.target.try_first | self.cache.ops()
        if self.prefer_mlx:
            names |= set(self.shims)
        return sorted(names)

    def install(self) -> torch.library.Library:
        """Register the kernels; they stay registered while the returned library is alive."""
        library = torch.library.Library("aten", "IMPL")
        key = self.target.dispatch_key
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Warning only once for all operators")  # overriding a kernel
            for name in self.overloads():
                op = overload(name)
                if op is None or torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"):
                    log.debug("fallback: %s has no kernel of its own to complete; not registered", name)
                    continue
                if name in self.target.missing and not torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
                    self.cache.seed([name])
                library.impl(op, self.kernel(op), key, with_keyset=True)
        return library

    def kernel(self, op: torch._ops.OpOverload) -> Callable[..., Any]:
        """The backend kernel that completes ``op`` on the target."""
        name: str = op._name
        schema = OpSchema.of(op)
        native = torch.library.get_kernel(op, self.target.dispatch_key)
        shim = self.shims.get(name)
        target, backend, cache = self.target, self.target.backend, self.cache
        prefer_mlx = self.prefer_mlx and shim is not None
        unsupported = self.unsupported
        clock = time.perf_counter

        def on_mlx(args: tuple[Any, ...], kwargs: dict[str, Any], why: str) -> Any:
            assert shim is not None
            start = clock()
            try:
                value = route.on_mlx(shim, schema, args, kwargs, target)
            except unsupported:
                return _REFUSED
            record_fallback(name, "mlx", clock() - start, why)
            return value

        def on_cpu(keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any], why: str) -> Any:
            start = clock()
            if target.native_is_cpu:
                value = native.call_boxed(keyset, *schema.boxed(args), **kwargs)
            else:
                value = route.on_cpu(schema, args, kwargs, target)
            record_fallback(name, "cpu", clock() - start, why)
            return value

        def fallback_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            if prefer_mlx and (value := on_mlx(args, kwargs, "MLX preferred")) is not _REFUSED:
                return value
            dtype = call_dtype(args, kwargs)
            if not cache.fails(name, dtype):
                try:
                    return native.call_boxed(keyset, *schema.boxed(args), **kwargs)
                except COMPATIBILITY_ERRORS as exc:
                    reason = classify(exc, backend)
                    if reason is None:
                        raise
                cache.record(name, ANY if reason == "kernel" else dtype, reason)
            why = f"no {backend} kernel" if cache.reason(name, dtype) == "kernel" else \
                f"{dtype} not supported on {backend}"
            if shim is not None and not prefer_mlx and (value := on_mlx(args, kwargs, why)) is not _REFUSED:
                return value
            return on_cpu(keyset, args, kwargs, why)

        fallback_kernel.__qualname__ = f"fallback_kernel[{name}]"
        return fallback_kernel


def mlx_shims(routes: Mapping[str, str]) -> tuple[dict[str, Callable[..., Any]], tuple[type[BaseException], ...]]:
    """The generated MLX shims of ``routes`` (aten overload -> shim key), and the exception a shim
    raises for arguments MLX cannot take; nothing where MLX is not installed."""
    if not routes:
        return {}, ()
    try:
        from torchdevice_generated.mlx_shims import SHIMS

        from torchdevice.fallback.mlx_bridge import MlxUnsupported
    except ImportError as exc:
        log.debug("fallback: no MLX route (%s)", exc)
        return {}, ()
    return {op: SHIMS[entry] for op, entry in routes.items() if entry in SHIMS}, (MlxUnsupported,)
