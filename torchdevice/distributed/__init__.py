"""torch.distributed for programs written for NCCL, on a machine without CUDA.

:func:`activate` is called by the runtime's ``install()``; every change goes through its
:class:`~torchdevice.patching.Patcher`, so ``uninstall()`` undoes it exactly.

- ``init_process_group`` / ``new_group``: NCCL spellings create gloo groups
  (:mod:`torchdevice.distributed.groups`).
- ``is_nccl_available()``, ``get_backend()``, ``get_backend_config()``, ``ProcessGroup.name()``:
  CUDA's answers for the program, the truth (gloo) for torch's own code
  (:mod:`torchdevice.distributed.answers`).
- ``all_reduce``, ``reduce``, ``reduce_scatter``..., on a group asked for NCCL: NCCL's reduce ops as
  NCCL computes them, and its refusals (:mod:`torchdevice.distributed.reduce_ops`); the single-tensor
  collectives take any shapes whose element counts agree, as NCCL does (:mod:`torchdevice.distributed.flat`).
- ``DistributedDataParallel``: CUDA ``device_ids`` / ``output_device`` follow the module, or on the simulated
  GPUs, whose ``cuda:i`` are devices of their own, are DDP's as on CUDA (:mod:`torchdevice.distributed.ddp`).
- MPS target: collectives on MPS tensors are staged through the CPU
  (:mod:`torchdevice.distributed.staging`).

Where CUDA is the target (passthrough), nothing is patched.
"""

from __future__ import annotations

from typing import Any

import torch

from torchdevice.device.target import Target
from torchdevice.distributed import answers, ddp, flat, groups, reduce_ops, staging
from torchdevice.patching import Patcher


def activate(patcher: Patcher, target: Target, options: dict[str, Any]) -> None:
    """Make NCCL-written distributed code run on ``target`` (the CPU or MPS)."""
    if not torch.distributed.is_available():
        return
    import torch.distributed.distributed_c10d as c10d
    from torch.nn.parallel import DistributedDataParallel

    for name, unspecified in (("init_process_group", "nccl"), ("new_group", None)):
        wrapped = groups.on_gloo(getattr(c10d, name), unspecified)
        patcher.set(c10d, name, wrapped)
        patcher.set(torch.distributed, name, wrapped)
    answers.patch(patcher)
    reduce_ops.patch(patcher)
    flat.patch(patcher)
    patcher.set(DistributedDataParallel, "__init__",
                ddp.on_module_device(DistributedDataParallel.__init__, options.get("devices", 1),
                                     follow=target.own is None))
    if target.device.type != "cpu":
        library = staging.register(target.device.type, dispatch_key=target.dispatch_key)
        patcher.defer(library._destroy)
