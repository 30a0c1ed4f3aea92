"""Device tensors handed to other processes as CUDA hands them: shared, not copied (the GPU's profile, ``cuda-sim``).

A CUDA tensor sent to another process (``torch.multiprocessing``: hogwild workers training one model, ``mp.spawn``'s
arguments, queues, DataLoader workers' batches) is the same GPU memory there, through CUDA's IPC: what one process
writes, the others read. A simulated device's memory is the host's, so the host's shared memory does the same: a
device tensor pickled for another process moves its storage into shared memory (once, the compiled backend's
``adopt``: the device keeps using it, counted as before) and goes as that memory, by torch's own reduction of host
tensors (a file descriptor, or a file name under the ``file_system`` strategy); the receiver wraps it as a tensor
of the same device. The Mac keeps MPS's refusal: torch shares no MPS memory between processes.
"""

from __future__ import annotations

from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch

from torchdevice.device.aten import cpp_device
from torchdevice.patching import Patcher
from torchdevice.simulated.device import NAME, device_tensor

_PYTHON = torch._C.DispatchKey.Python


def activate(patcher: Patcher) -> None:
    """Share device tensors with the processes they are sent to until ``patcher.restore()``."""
    reducers = ForkingPickler._extra_reducers  # type: ignore[attr-defined]  # torch.multiprocessing's registrations
    originals = {cls: reducers[cls] for cls in (torch.Tensor, torch.nn.Parameter)}
    for cls, original in originals.items():
        reducers[cls] = _shared(original)
    patcher.defer(lambda: reducers.update(originals))


def _shared(original: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
    """Torch's reduction of tensors, sharing a strided device tensor's memory (torch's refuses a non-leaf tensor that
    requires grad, as for every device)."""
    def reduce(tensor: torch.Tensor) -> Any:
        found = cpp_device(tensor)
        if (found.type != NAME or tensor.layout != torch.strided or torch._C._dispatch_keys(tensor).has(_PYTHON)
                or (tensor.requires_grad and not tensor.is_leaf)):
            return original(tensor)
        return _rebuild, (type(tensor), _shared_memory(tensor), tensor.dtype, found.index, tensor.storage_offset(),
                          tensor.size(), tensor.stride(), tensor.requires_grad)

    return reduce


def _shared_memory(tensor: torch.Tensor) -> torch.Tensor:
    """The host's shared memory ``tensor``'s storage is in (a ``uint8`` host tensor), moved there the first time."""
    held = torch.ops.torchdevice_sim.held_host(tensor)
    if held is not None and held.is_shared():
        return held
    shared = torch.empty(tensor.untyped_storage().nbytes(), dtype=torch.uint8).share_memory_()
    torch.ops.torchdevice_sim.adopt(tensor, shared)
    return shared


def _rebuild(cls: type, shared: torch.Tensor, dtype: torch.dtype, index: int, offset: int, size: torch.Size,
             stride: tuple[int, ...], requires_grad: bool) -> torch.Tensor:
    """The device tensor sent: of device ``index``, over the shared memory (as torch's ``rebuild_tensor``)."""
    host = torch.empty(0, dtype=dtype).set_(shared.untyped_storage(), offset, size, stride)
    tensor = device_tensor(host, index)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(tensor, requires_grad=requires_grad)
    tensor.requires_grad = requires_grad
    return tensor
