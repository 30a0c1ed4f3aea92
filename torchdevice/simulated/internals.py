"""The torch internals the simulated devices use, and the torch release they were read from.

A simulated device is a ``PrivateUse1`` backend, and some of what it needs torch offers no public API for: private
functions of ``torch._C``, ``torch.library.Library._destroy``, and, on the Python backend only (where the compiled
one cannot be built, :mod:`.backend`), two C++ symbols of ``libc10`` called through ctypes and the byte layout of a
DLPack capsule. These were read from torch :data:`RELEASE`; another release may lack one, and a wrong guess crashes
the process instead of raising. :func:`check` refuses, at install, a torch that lacks one of the private functions,
in one line naming the release, what it lacks, the target that needs it and the target that runs there (every
release from 2.10 to 2.15 has them all); the Python backend checks its ``libc10`` symbols where it loads them.
"""

from __future__ import annotations

import ctypes

import torch

RELEASE = "2.13"
"""The torch release (major.minor) these internals were read from."""
PRIVATE = ("_C._acc.register_python_privateuseone_hook", "_C._acc.register_python_privateuseone_device_guard",
           "_C._acc.PrivateUse1Hooks", "_C._acc.DeviceGuard", "_C._get_privateuse1_backend_name",
           "_C._construct_storage_from_data_pointer", "_C._set_multithreading_enabled",
           "_C._is_multithreading_enabled", "_C._dispatch_has_kernel_for_dispatch_key",
           "_C._dispatch_get_registrations_for_dispatch_key", "library.Library._destroy", "_register_device_module")
"""The private attributes of ``torch`` the simulation calls, as dotted paths below ``torch``."""
GET_CPU_ALLOCATOR = "_ZN3c1015GetCPUAllocatorEv"
"""``c10::GetCPUAllocator()`` (the Python backend gives the host's allocator to the device)."""
SET_ALLOCATOR = "_ZN3c1012SetAllocatorENS_10DeviceTypeEPNS_9AllocatorEh"
"""``c10::SetAllocator(DeviceType, Allocator*, uint8_t)``."""
DLPACK_EXT_DEV = 12
"""DLPack's device type of an extension device, which torch reads as ``PrivateUse1``."""
DLPACK_DEVICE_TYPE_OFFSET = ctypes.sizeof(ctypes.c_void_p)
"""Where ``DLTensor.device.device_type`` sits in a ``DLManagedTensor``: right after the data pointer."""


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
