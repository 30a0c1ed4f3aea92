"""The fallback engine: operations the target cannot run still run, with the same results.

``activate(patcher, target, options)`` (called by the runtime's ``install()``) registers, under
the target's dispatch key, a backend kernel for each aten overload that may fail there: those the
generated kernel table (``torchdevice_generated.fallback_table``) lists as missing or to watch,
those with MPS limits that CUDA does not have (:mod:`torchdevice.device.limits`), those the capability cache
learned failing in earlier runs, and, with ``options["prefer_mlx"]``, those with a verified MLX shim. Each
kernel routes a call one of its limits applies to, tries the target unless a verdict says it fails, falls
back only on a device-compatibility error (:mod:`torchdevice.device.errors`), remembers the verdict
(:mod:`.cache`) and runs the call through MLX or on the CPU (:mod:`.route`, :mod:`.engine`).

Why the dispatcher and not Python wrappers: one registration per overload catches every way the
op is reached, ``torch.cumsum``, ``Tensor.cumsum``, ``x @ y``, functional forms, decompositions,
the backward pass, without touching a single Python attribute. The kernel runs below autograd, so
gradients flow through the CPU route to leaves on the target with the op's own derivative formula,
and above the Python bindings, so ``torch.return_types``, ``PackedSequence``, in-place identity
and ``out=`` come out exactly as from a native kernel. Ops not registered cost nothing: they are
never wrapped. This is how PyTorch completes backends itself (``PYTORCH_ENABLE_MPS_FALLBACK``
registers a boxed fallback on ``MPS``; ``torch.library.get_kernel`` exists to wrap a kernel), but
per op, dtype-aware, remembered, and with MLX before the CPU.

How it runs without Apple hardware: the simulated Mac (:mod:`torchdevice.simulated`) gives the engine a
target whose kernels are MPS's, simulated on a device of torch's ``PrivateUse1`` dispatch key. The engine cannot
tell that target from MPS: it registers with ``torch.library``, captures the replaced kernel with ``get_kernel``,
calls it, classifies what it raises and routes the call, exactly as on a Mac; tests and benchmarks drive it so.

Limits: an overload is guarded only when the tables, the cache or ``prefer_mlx`` name it (the
catalog has public aten ops only, so private ones such as ``_cdist_backward`` are not in the
table); creating a float64 tensor on MPS (factories, ``.to(torch.float64)``) is the device layer's
business, and float64 results of a fallback are hosted device tensors (their data the host keeps,
:mod:`torchdevice.device.hosted`), as MPS cannot hold them; a routed view op returns a copy, not a view
(views have kernels on every device, so this does not arise in practice).

The registrations live in one ``torch.library.Library`` that the runtime's patcher destroys on
``uninstall()``, which removes every registration with it.
"""

from __future__ import annotations

from typing import Any

from torchdevice.device.target import Target
from torchdevice.fallback.cache import CapabilityCache
from torchdevice.fallback.engine import Engine, mlx_shims
from torchdevice.patching import Patcher

__all__ = ["Engine", "activate"]


def activate(patcher: Patcher, target: Target, options: dict[str, Any]) -> None:
    """Complete ``target``'s kernels until ``patcher.restore()``; ``options["prefer_mlx"]`` sends every
    op with a verified MLX shim to MLX first."""
    from torchdevice_generated.fallback_table import MLX_ROUTES

    cache, prefer_mlx = CapabilityCache.open(target.name), bool(options.get("prefer_mlx"))
    if not (prefer_mlx and MLX_ROUTES) and not Engine(target, cache).overloads():
        return  # the target completes every op: nothing to register, no MLX shim to import
    shims, unsupported = mlx_shims(MLX_ROUTES)
    engine = Engine(target, cache, shims=shims, unsupported=unsupported, prefer_mlx=prefer_mlx)
    library = engine.install()
    patcher.defer(library._destroy)
