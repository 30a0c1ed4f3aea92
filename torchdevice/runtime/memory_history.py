"""torch's memory history where the target has no CUDA caching allocator (the cpu and mps targets, the simulated
Mac): ``torch.cuda.memory._record_memory_history`` (either form) is taken and records nothing, ``_snapshot()`` has
no segments and an empty trace per device, and ``_dump_snapshot`` writes it, so a program written to profile its
GPU's memory runs to its end (torch's own Python runs as it is: a CPU build of torch lacks the C functions it calls,
a CUDA build without a GPU refuses them). A simulated GPU's allocator keeps a real history
(:mod:`torchdevice.simulated.memory_tools`)."""

from __future__ import annotations

from typing import Any

import torch

from torchdevice.patching import Patcher
from torchdevice.runtime.emulation import Emulation
from torchdevice.runtime.installation import Installation


def patch(patcher: Patcher, r: Installation, emulation: Emulation) -> None:
    if r.target.gpu is not None:  # the simulated GPU's allocator answers
        return
    devices = r.emulated

    def record(*args: Any, **kwargs: Any) -> None:
        return None

    def snapshot(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {"segments": [], "device_traces": [[] for _ in range(devices)]}

    patcher.set(torch._C, "_cuda_record_memory_history", record)
    patcher.set(torch._C, "_cuda_record_memory_history_legacy", record)
    patcher.set(torch._C, "_cuda_memorySnapshot", snapshot)
