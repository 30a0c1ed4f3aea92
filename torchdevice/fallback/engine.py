"""The fallback engine: one backend kernel per aten overload that may fail on the target.

For each overload that the kernel table, the capability cache, MPS's limits or ``prefer_mlx`` names, the
engine registers a kernel under the target's dispatch key (``torch.library.Library("aten", "IMPL")``),
after capturing the kernel it replaces (``torch.library.get_kernel``: the target's own, or its
backend fallback that raises "not currently implemented"). The kernel, per call:

1. checks the call against the overload's limits (:mod:`torchdevice.device.limits`: those CUDA runs, on the
   target's macOS version): a call one applies to is routed (3) with the limit's reason, without trying;
2. looks up the verdict for (op, dtype of the call); unless it says the target fails, calls the
   target's own kernel; an exception that is none of its limits' refusals and that
   :func:`~torchdevice.device.errors.classify` does not call a device-compatibility error propagates untouched
   (the caller gets the identical object); a limit's refusal (the table's condition missed the call) is
   routed; a missing kernel or dtype records a verdict (persisted) and falls through to 3;
3. routes the call: through the op's verified MLX shim when it has one (its ``MlxUnsupported``
   means "not these arguments": the CPU then; torch checks the call first, :mod:`~.validate`), else on
   the CPU (:mod:`~torchdevice.fallback.route`; an MPS-only overload through its CPU twin, the limit's
   ``instead``), and counts it, with the seconds it took there and why, with
   :func:`torchdevice.reporting.counts.record_fallback`. Where the CPU refuses the call too (``lu_factor``
   without pivoting), an error names the limit.

An overload with limits that has no kernel of its own (``CompositeImplicitAutograd``: ``softmax.int``,
``scaled_dot_product_attention``, ``lstm.input``, whose decompositions call MPS-only kernels) is completed one
key higher, on the target's autograd key (``AutogradMPS``): the same checks, and a call under a limit runs whole
on the CPU with its gradients (the moves there and back are differentiable).

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

from torchdevice.device import limits
from torchdevice.device.aten import OpSchema, in_place_of_out, kernel_below, overload, tensors
from torchdevice.device.errors import COMPATIBILITY_ERRORS, classify
from torchdevice.device.limits import Limit
from torchdevice.device.target import Target
from torchdevice.fallback import route
from torchdevice.fallback.cache import ANY, CapabilityCache
from torchdevice.fallback.validate import Declined
from torchdevice.reporting.counts import record_fallback

log = logging.getLogger("torchdevice.fallback")

_REFUSED = object()
_PYTHON = torch._C.DispatchKey.Python


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
        macos: tuple[int, int] | None = None,
    ) -> None:
        self.target = target
        self.cache = cache
        self.shims = dict(shims or {})
        self.unsupported: tuple[type[BaseException], ...] = (*unsupported, Declined)  # shims', torch's checks'
        self.prefer_mlx = prefer_mlx
        self.macos = limits.macos() if macos is None else macos
        """The macOS version MPS's limits are checked for (:func:`torchdevice.device.limits.macos`)."""

    def guards(self) -> dict[str, tuple[Limit, ...]]:
        """Overload -> the limits the engine checks its calls against: on an MPS target, those CUDA runs that can
        apply on :attr:`macos`."""
        if self.target.backend != "MPS":
            return {}
        found = {}
        for name in limits.limited():
            op = overload(name)
            routed = tuple(lim for lim in limits.limits_of(op) if lim.routed and lim.possible(self.macos)) \
                if op is not None else ()
            if routed:
                found[name] = routed
        return found

    def overloads(self) -> list[str]:
        """The overloads to register: known missing, tried first, learned failing, limited, MLX-preferred."""
        names = set(self.target.missing) | self.target.try_first | self.cache.ops() | set(self.guards())
        if self.prefer_mlx:
            names |= set(self.shims)
        return sorted(names)

    def install(self) -> torch.library.Library:
        """Register the kernels; they stay registered while the returned library is alive."""
        library = torch.library.Library("aten", "IMPL")
        key = self.target.dispatch_key
        guards = self.guards()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Warning only once for all operators")  # overriding a kernel
            for name in self.overloads():
                op = overload(name)
                if op is None:
                    continue
                if torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd"):
                    if name in guards:  # its limits are met in its decomposition: guarded a key higher
                        library.impl(op, self.kernel(op, guards[name], f"Autograd{key}"), f"Autograd{key}",
                                     with_keyset=True, allow_override=True)
                    else:
                        log.debug("fallback: %s has no kernel of its own to complete; not registered", name)
                    continue
                if name in self.target.missing and not torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
                    self.cache.seed([name])
                library.impl(op, self.kernel(op, guards.get(name, ())), key, with_keyset=True, allow_override=True)
        return library

    def kernel(self, op: torch._ops.OpOverload, guards: tuple[Limit, ...] = (),
               key: str | None = None) -> Callable[..., Any]:
        """The kernel that completes ``op`` on the target, registered under ``key`` (default: the target's
        dispatch key), checking its calls against ``guards``."""
        name: str = op._name
        schema = OpSchema.of(op)
        below = kernel_below(op, key or self.target.dispatch_key, self.target.kernels)
        shim = self.shims.get(name) if key is None else None
        target, backend, cache, macos = self.target, self.target.backend, self.cache, self.macos
        prefer_mlx = self.prefer_mlx and shim is not None
        decomposes = key is not None  # registered on the autograd key: the overload's decomposition is its kernel
        unsupported = self.unsupported
        clock = time.perf_counter

        def on_mlx(args: tuple[Any, ...], kwargs: dict[str, Any], why: str) -> Any:
            assert shim is not None
            if in_place_of_out(op, args, kwargs) is not None:  # an in-place op's composite code: the CPU's runs it
                return _REFUSED
            start = clock()
            try:
                value = route.on_mlx(shim, schema, args, kwargs, target)
            except unsupported:
                return _REFUSED
            record_fallback(name, "mlx", clock() - start, why)
            return value

        def on_cpu(keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any], why: str,
                   runs: OpSchema = schema) -> Any:
            start = clock()
            if target.native_is_cpu:
                value = below(keyset, *args, **kwargs)
            else:
                value = route.on_cpu(runs, args, kwargs, target)
            record_fallback(name, "cpu", clock() - start, why)
            return value

        def under_limit(keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any], limit: Limit) -> Any:
            if limit.row.cpu:
                raise NotImplementedError(
                    f"torchdevice: {name} under MPS's limit {limit.name!r} ({limit.why}): MPS refuses the call "
                    f"({limit.exception(args, kwargs)}), and the CPU cannot run it either ({limit.row.cpu}); CUDA "
                    "runs it, no device here does")
            if limit.instead is not None:
                return on_cpu(keyset, args, kwargs, limit.why, OpSchema.of(limit.instead))
            if shim is not None and (value := on_mlx(args, kwargs, limit.why)) is not _REFUSED:
                return value
            return on_cpu(keyset, args, kwargs, limit.why)

        def fallback_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            if prefer_mlx and (value := on_mlx(args, kwargs, "MLX preferred")) is not _REFUSED:
                return value
            for limit in guards:
                if limit.applies(args, kwargs, macos):
                    return under_limit(keyset, args, kwargs, limit)
            dtype = call_dtype(args, kwargs)
            if not cache.fails(name, dtype):
                if decomposes and any(torch._C._dispatch_keys(t).has(_PYTHON) for t in tensors((args, kwargs))):
                    # a tensor subclass (hosted float64): a Python kernel below would hand it back to this one
                    return op.decompose(*args, **kwargs)
                try:
                    return below(keyset, *args, **kwargs)
                except COMPATIBILITY_ERRORS as exc:
                    hit = next((limit for limit in guards if limit.raised(exc)), None)
                    if hit is not None:
                        return under_limit(keyset, args, kwargs, hit)
                    reason = classify(exc, backend)
                    if reason is None:
                        raise
                    if reason == "limit":  # these arguments, not the op or its dtype: no verdict
                        return on_cpu(keyset, args, kwargs, f"a {backend} limit")
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
