"""The torch internals the simulated devices use, and the torch release they were read from.

A simulated device is a ``PrivateUse1`` backend, and some of what it needs torch offers no public API for: private
functions of ``torch._C`` and ``torch.library.Library._destroy``. These were read from torch 2.13; another release may
lack one. :func:`check` refuses, at install, a torch that lacks one of them, in one line naming the
release, what it lacks, the target that needs it and the target that runs there (every release from 2.10 to 2.15 has
them all).
"""

from __future__ import annotations

import torch

PRIVATE = ("_C._get_privateuse1_backend_name", "_C._construct_storage_from_data_pointer",
           "_C._set_multithreading_enabled", "_C._is_multithreading_enabled",
           "_C._dispatch_has_kernel_for_dispatch_key", "_C._dispatch_get_registrations_for_dispatch_key",
           "library.Library._destroy", "_register_device_module")
"""The private attributes of ``torch`` the simulation calls, as dotted paths below ``torch``."""


def check(target: str) -> None:
    """Raise one line naming the installed release, what it lacks, ``target`` and a target that works there, unless
    this torch has each private attribute the simulation calls (:data:`PRIVATE`)."""
    missing = [path for path in PRIVATE if not _has(path)]
    if missing:
        raise RuntimeError(f"torchdevice: torch {torch.__version__} lacks {', '.join('torch.' + p for p in missing)}, "
                           f"which the {target} target needs; --target cpu runs there")


def _has(path: str) -> bool:
    found: object = torch
    for part in path.split("."):
        if not hasattr(found, part):
            return False
        found = getattr(found, part)
    return True
