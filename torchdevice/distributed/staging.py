"""Collectives on tensors of a device gloo cannot read (MPS, the simulated Mac's), staged through the CPU.

gloo serves CPU tensors only, and the ``c10d::`` collective ops have no kernel for MPS. For each
``c10d::`` op with a CPU kernel, a kernel is registered on the device's dispatch key that copies
the device tensors to the CPU, runs the op there (so the group's CPU backend, gloo, does the
work), waits for it, and copies every staged tensor back. DDP's reducer calls the same ops, so
gradient buckets take this route too. The collective completes before the kernel returns: the
``Work`` handed back is already done.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map, tree_unflatten

from torchdevice.device.aten import cpp_device

NAMESPACE = "c10d"


def collective_ops() -> list[torch._ops.OpOverload]:
    """Every ``c10d::`` op that has a CPU kernel."""
    names = sorted(
        name
        for name in torch._C._dispatch_get_all_op_names()
        if name.startswith(f"{NAMESPACE}::") and torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")
    )
    return [getattr(torch.ops.c10d, name.split("::")[1]).default for name in names]


def staged(op: torch._ops.OpOverload, device_type: str) -> Callable[..., Any]:
    """A kernel for ``op`` that runs it on CPU copies of the ``device_type`` tensors it is given."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        given, spec = tree_flatten((args, kwargs))
        copies = [_to_cpu(x, device_type) for x in given]
        cpu_args, cpu_kwargs = tree_unflatten(copies, spec)
        # Below autograd, so the re-dispatch on CPU tensors reaches the CPU kernel whatever key
        # this kernel is registered on.
        with torch._C._AutoDispatchBelowAutograd():
            out = op(*cpu_args, **cpu_kwargs)
        for leaf in tree_leaves(out):
            if _is_work(leaf):
                leaf.wait()
        originals = {}
        for original, copy in zip(given, copies, strict=True):
            if copy is not original:
                original.copy_(copy)
                originals[id(copy)] = original
        return tree_map(lambda x: originals.get(id(x), x), out)

    return kernel


def register(device_type: str, dispatch_key: str) -> torch.library.Library:
    """Register :func:`staged` kernels for every collective op on ``dispatch_key``.

    The registrations last as long as the returned library object.
    """
    library = torch.library.Library(NAMESPACE, "IMPL")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Warning only once for all operators")  # torch's own PrivateUse1 kernels
        warnings.filterwarnings("ignore", "Overriding a previously registered kernel")
        for op in collective_ops():
            library.impl(op, staged(op, device_type), dispatch_key, allow_override=True)
    return library


def _to_cpu(x: Any, device_type: str) -> Any:
    if isinstance(x, torch.Tensor) and cpp_device(x).type == device_type:
        return x.to("cpu", copy=True)
    return x


def _is_work(x: Any) -> bool:
    return isinstance(x, torch.ScriptObject) and x._type().qualified_name().endswith(".c10d.Work")
