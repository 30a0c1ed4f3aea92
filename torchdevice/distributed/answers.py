"""What a program asks torch.distributed about NCCL, answered as on a CUDA machine.

- ``is_nccl_available()`` is True (so ``is_backend_available("nccl")`` is too): NCCL is emulated.
- For a group asked for NCCL (:func:`torchdevice.distributed.groups.asked_for`),
  ``get_backend(group)``, ``get_backend_config(group)`` and ``group.name()`` give CUDA's answers
  (``"nccl"``, ``"cuda:nccl"``) to the program and the libraries it uses. Torch's own code gets
  the truth (``"gloo"``): it picks the device of collectives, the options of new groups and the
  paths DDP takes from these answers, and the gloo ones are right for a gloo group (the same
  split as :mod:`torchdevice.callers` makes for ``torch.cuda``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torchdevice.callers import told_the_truth
from torchdevice.distributed.groups import asked_for
from torchdevice.patching import Patcher


def is_nccl_available() -> bool:
    """NCCL is emulated (on gloo) wherever the runtime is installed."""
    return True


def patch(patcher: Patcher) -> None:
    """Install the answers above in ``torch.distributed`` and on ``ProcessGroup``."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    patched = {"is_nccl_available": is_nccl_available,
               "get_backend": _cuda_answer(c10d.get_backend, 0),
               "get_backend_config": _cuda_answer(c10d.get_backend_config, 1)}
    for name, replacement in patched.items():
        patcher.set(c10d, name, replacement)
        patcher.set(dist, name, replacement)
    patcher.set(c10d.ProcessGroup, "name", _cuda_answer(c10d.ProcessGroup.name, 0, default_group=False))


def _cuda_answer(query: Callable[..., Any], which: int, default_group: bool = True) -> Callable[..., Any]:
    """``query(group)`` answering item ``which`` of the group's CUDA names to callers outside torch.

    ``default_group``: ``group`` may be omitted (``None``) for the default group."""

    @functools.wraps(query)
    def answer(group: Any = None) -> Any:
        truth = query() if group is None and default_group else query(group)  # torch's checks and errors
        if told_the_truth("distributed.backend"):
            return truth
        if group is None and default_group:
            import torch.distributed.distributed_c10d as c10d

            group = c10d.GroupMember.WORLD
        names = asked_for(group)
        return truth if names is None else names[which]

    return answer
