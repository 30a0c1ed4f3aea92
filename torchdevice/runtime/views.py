"""Who is asking: user code sees emulated CUDA, torch's own code sees the machine as it is.

Torch internals branch on ``torch.cuda.is_available()``, ``device_count()`` and ``Tensor.is_cuda``
and then call CUDA-only C functions (pinned memory, fused kernels, cuDNN paths). Those gates
therefore answer truthfully to callers inside ``torch`` (and ``torchdevice``) and answer as a CUDA
machine would to everyone else: the program and the libraries it uses.
"""

from __future__ import annotations

import sys


def torch_internal(depth: int = 2) -> bool:
    """Whether the function ``depth`` frames up (default: the caller's caller) belongs to torch or torchdevice."""
    name = sys._getframe(depth).f_globals.get("__name__", "")
    return name == "torch" or name.startswith(("torch.", "torchdevice"))
