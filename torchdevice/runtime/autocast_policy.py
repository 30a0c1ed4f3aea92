"""CUDA's autocast policy on the target's autocast dispatch key.

``torch.autocast("cuda")`` runs on the target as the target's autocast (:mod:`.amp` translates it), so
the dispatcher sends ops to the target's autocast key (``AutocastCPU``, ``AutocastMPS``), whose kernels
carry the target's policy: the CPU runs ``softmax``, ``sum``, ``layer_norm``... in the lower precision
where CUDA runs them in float32. :func:`activate` registers, with ``torch.library``, one kernel per
aten overload of CUDA's policy (``torchdevice_generated.autocast_table``, scanned from ATen's
``autocast_mode.h``) under that key. Each kernel applies CUDA's policy while a redirected CUDA region
is active, which is CUDA's own autocast state (``torch.is_autocast_enabled("cuda")``, set by
:mod:`.amp` for such regions); otherwise (``torch.autocast("cpu")`` written for the CPU) it calls the
kernel it replaced, so the CPU's policy is unchanged. Ops outside CUDA's lists that the target's policy
casts (:func:`untouched`) are cast by nothing in such a region, as on CUDA.

The policies, as ``at::autocast`` implements them: only floating tensors that are not float64, on the
target, are cast (``lower_precision_fp``: to CUDA's autocast dtype; ``fp32``: to float32);
``fp32_set_opt_dtype`` passes ``dtype=float32`` when the call names no dtype and its first tensor
is eligible, and casts nothing; ``fp32_append_dtype`` calls the overload that takes a dtype;
``promote`` casts to the widest floating type among the arguments; ``banned`` raises CUDA's error.
The kernels run with the autocast key excluded, as ATen's do. CUDA's weight cast cache is not
reproduced: a parameter is cast again at each use (same values; the cost is in ``bench/``).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import torch

from torchdevice.device.aten import OpSchema, overload
from torchdevice.patching import Patcher

log = logging.getLogger("torchdevice")
_cuda_enabled = torch._C.is_autocast_enabled
_cuda_dtype = torch._C.get_autocast_dtype
_guard = torch._C._ExcludeDispatchKeyGuard
_FLOAT, _DOUBLE = torch.float32, torch.float64
Kernel = Callable[..., Any]


def activate(patcher: Patcher, on_target: Callable[[torch.Tensor], bool], key: str) -> None:
    """Register CUDA's policy on autocast dispatch ``key`` (the target's), casting the tensors ``on_target`` (of the
    target's device, whoever asks), until ``patcher.restore()``."""
    from torchdevice_generated.autocast_table import POLICY

    library = torch.library.Library("aten", "IMPL")
    patcher.defer(library._destroy)
    listed = {name.removesuffix(".default") for name, *_ in POLICY}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Warning only once for all operators")  # overriding the key's kernel
        for name, policy, dtype_at, redispatch, message in POLICY:
            op = overload(name)
            if op is not None:
                library.impl(op, kernel(op, policy, key, on_target, dtype_at, redispatch, message), key,
                             with_keyset=True, allow_override=True)
        for name in torch._C._dispatch_get_registrations_for_dispatch_key(key):
            op = overload(name) if name.startswith("aten::") else None
            if op is not None and name.removeprefix("aten::") not in listed:
                library.impl(op, untouched(op, key), key, with_keyset=True, allow_override=True)


def untouched(op: torch._ops.OpOverload, key: str) -> Kernel:
    """The autocast kernel of an op outside CUDA's lists that the target's policy casts (the CPU's runs
    ``cross_entropy_loss`` and ``fft_*`` in float32, MPS's ``batch_norm``): in a redirected CUDA region, no cast, as
    CUDA's autocast falls through for it (the ops it calls still meet the autocast key); else the key's own."""
    own, through = _own(op, key), _fall_through(op, key)

    def untouched_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        return (through if _cuda_enabled("cuda") else own)(keyset, args, kwargs)

    untouched_kernel.__qualname__ = f"cuda_autocast[{op._name}: untouched]"
    return untouched_kernel


def kernel(op: torch._ops.OpOverload, policy: str, key: str, on_target: Callable[[torch.Tensor], bool],
           dtype_at: int = -1,
           redispatch: str = "", message: str = "") -> Kernel:
    """The autocast kernel of ``op``: CUDA's ``policy`` in a redirected CUDA region, else the key's own."""
    exclude = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))
    own, run = _own(op, key), op._op

    def eligible(t: Any) -> bool:
        return (isinstance(t, torch.Tensor) and t.dtype.is_floating_point and t.dtype is not _DOUBLE
                and on_target(t))

    def cast(to: torch.dtype, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            dtype = value.dtype
            if dtype is to or not dtype.is_floating_point or dtype is _DOUBLE or not on_target(value):
                return value
            return value.to(to)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            return [cast(to, v) for v in value]
        return value

    def call(to: torch.dtype, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        with _guard(exclude):
            if kwargs:
                return run(*[cast(to, a) for a in args], **{k: cast(to, v) for k, v in kwargs.items()})
            return run(*[cast(to, a) for a in args])

    if policy == "lower_precision_fp":
        def apply(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return call(_cuda_dtype("cuda"), args, kwargs)
    elif policy == "fp32":
        def apply(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return call(_FLOAT, args, kwargs)
    elif policy == "fp32_set_opt_dtype":
        def apply(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            positional = 0 <= dtype_at < len(args)
            with _guard(exclude):
                if (args[dtype_at] if positional else kwargs.get("dtype")) is not None or not eligible(args[0]):
                    return run(*args, **kwargs)
                return run(*(args[:dtype_at] if positional else args), **{**kwargs, "dtype": _FLOAT})
    elif policy == "fp32_append_dtype":
        target = overload(redispatch)
        assert target is not None, redispatch
        defaults = [a.default_value for a in op._schema.arguments]

        def apply(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            full = (*args, *defaults[len(args):])
            with _guard(exclude):
                return target(*full, dtype=_FLOAT if eligible(args[0]) else args[0].dtype)
    elif policy == "promote":
        def apply(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            return call(promote_type(_cuda_dtype("cuda"), [*args, *kwargs.values()], eligible), args, kwargs)
    elif policy == "banned":
        def apply(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            raise RuntimeError(message)
    else:
        raise ValueError(f"unknown autocast policy {policy!r} for {op}")

    def autocast_kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if _cuda_enabled("cuda"):
            return apply(args, kwargs)
        return own(keyset, args, kwargs)

    autocast_kernel.__qualname__ = f"cuda_autocast[{op._name}.{op._overloadname}]"
    return autocast_kernel


def promote_type(lower: torch.dtype, values: list[Any], eligible: Callable[[Any], bool]) -> torch.dtype:
    """ATen's ``promote_type``: float32 if any eligible floating argument is float32, else ``lower``;
    float64 arguments are ignored."""
    to = lower
    for value in values:
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if not eligible(t):
                continue
            if to is _FLOAT or t.dtype is _FLOAT:
                to = _FLOAT
            elif t.dtype is not lower:
                raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return to


def _own(op: torch._ops.OpOverload, key: str) -> Kernel:
    """The key's own behaviour for ``op``: the kernel registered there, or falling through to the next key
    (ops called inside still see the key, as with the dispatcher's own fall-through)."""
    schema, plan = op._schema, OpSchema.of(op)
    qualified = f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
    if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key):
        return _fall_through(op, key)
    native = torch.library.get_kernel(op, key)

    def registered(keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return native.call_boxed(keyset, *plan.boxed(args), **kwargs)
    return registered


def _fall_through(op: torch._ops.OpOverload, key: str) -> Kernel:
    """``op`` sent on past ``key``, as the dispatcher's fall-through does (ops called inside still see the key)."""
    skip, redispatch, plan = getattr(torch._C.DispatchKey, key), op._handle.redispatch_boxed, OpSchema.of(op)

    def fall_through(keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return redispatch(keyset.remove(skip), *plan.boxed(args), **kwargs)
    return fall_through
