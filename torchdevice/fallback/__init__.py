"""The fallback engine: operations the target cannot run still run, with the same results.

``activate(patcher, target, options)`` (called by the runtime's ``install()``) registers, under
the target's dispatch key, a backend kernel for each aten overload that may fail there: those the
generated kernel table (``torchdevice_generated.fallback_table``) lists as missing or to watch,
those the capability cache learned failing in earlier runs, and, with ``options["prefer_mlx"]``,
those with a verified MLX shim. Each kernel tries the target unless a verdict says it fails, falls
back only on a device-compatibility error (:mod:`.errors`), remembers the verdict (:mod:`.cache`)
and runs the call through MLX or on the CPU (:mod:`.route`, :mod:`.engine`).

Why the dispatcher and not Python wrappers: one registration per overload catches every way the
op is reached, ``torch.cumsum``, ``Tensor.cumsum``, ``x @ y``, functional forms, decompositions,
the backward pass, without touching a single Python attribute. The kernel runs below autograd, so
gradients flow through the CPU route to leaves on the target with the op's own derivative formula,
and above the Python bindings, so ``torch.return_types``, ``PackedSequence``, in-place identity
and ``out=`` come out exactly as from a native kernel. Ops not registered cost nothing: they are
never wrapped. This is how PyTorch completes backends itself (``PYTORCH_ENABLE_MPS_FALLBACK``
registers a boxed fallback on ``MPS``; ``torch.library.get_kernel`` exists to wrap a kernel), but
per op, dtype-aware, remembered, and with MLX before the CPU.

How it runs without Apple hardware: the same registrations go under ``PrivateUse1``, a real
dispatch key (:mod:`.simulated`). A simulated MPS target adds it to the thread's included dispatch
keys, so CPU tensors dispatch to it first, and registers a backend fallback there that runs each
op on the CPU, except the ops it is told MPS lacks, which raise MPS's own error messages. The
engine cannot tell that target from MPS: it registers with ``torch.library``, captures the
replaced kernel with ``get_kernel``, calls it, classifies what it raises and routes the call,
exactly as on a Mac; tests and benchmarks drive it so. The one difference a target declares is
:meth:`~.target.Target.escape`: to run on the plain CPU, the simulated target leaves the included
key; a real device has nothing to leave.

Limits: an overload is guarded only when the table, the cache or ``prefer_mlx`` names it (the
catalog has public aten ops only, so private ones such as ``_cdist_backward`` are not in the
table); creating a float64 tensor on MPS (factories, ``.to(torch.float64)``) is the device layer's
business, and float64 results of a fallback stay on the CPU, as MPS cannot hold them; a routed view
op returns a copy, not a view (views have kernels on every device, so this does not arise in
practice).

The registrations live in one ``torch.library.Library`` held as this module's ``_library``
attribute, set through the runtime's patcher: ``uninstall()`` deletes the attribute, the library
is freed and PyTorch removes every registration with it.
"""

from __future__ import annotations

import sys
from typing import Any

import torch

from torchdevice.fallback.cache import CapabilityCache
from torchdevice.fallback.engine import Engine, mlx_shims
from torchdevice.fallback.target import Target, for_device
from torchdevice.runtime.devices import is_simulated
from torchdevice.runtime.patching import Patcher

__all__ = ["Engine", "Target", "activate"]


def activate(patcher: Patcher, target: torch.device | Target, options: dict[str, Any]) -> None:
    """Complete ``target``'s kernels until ``patcher.restore()``; ``options["prefer_mlx"]`` sends every
    op with a verified MLX shim to MLX first."""
    if isinstance(target, torch.device) and is_simulated(target):
        from torchdevice.fallback import mps_sim

        target = mps_sim.activate(patcher).target()
    spec = target if isinstance(target, Target) else for_device(target)
    if spec is None:
        return
    from torchdevice_generated.fallback_table import MLX_ROUTES

    cache, prefer_mlx = CapabilityCache.open(spec.name), bool(options.get("prefer_mlx"))
    if not (prefer_mlx and MLX_ROUTES) and not Engine(spec, cache).overloads():
        return  # the target completes every op: nothing to register, no MLX shim to import
    shims, unsupported = mlx_shims(MLX_ROUTES)
    engine = Engine(spec, cache, shims=shims, unsupported=unsupported, prefer_mlx=prefer_mlx)
    patcher.set(sys.modules[__name__], "_library", engine.install())
