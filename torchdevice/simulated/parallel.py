"""Torch's data-parallel wrappers on simulated GPUs (the GPU's profile, ``cuda-sim``): ``nn.DataParallel`` and FSDP.

``torch.nn.parallel``'s scatter, gather and broadcasts call CUDA's C++ functions (``torch._C._scatter`` and kin, from
``torch/csrc/cuda/comm.cpp``), which a CPU build of torch lacks. They are given here as that file computes them: a
scatter's chunks are views of the input where they stay on its device and copies elsewhere, a broadcast gives the
source device the source tensors themselves, a gather concatenates into a new tensor of the destination (the current
device, or the host for ``-1``), each with CUDA's checks and messages. ``parallel_apply`` (each replica on its device)
and FSDP's modules are answered as the program is (:func:`torchdevice.callers.tell_as_program`): CUDA is there, the
parameters are on ``cuda:i``, and its streams and events are the emulated ones, which is all they ask of CUDA.
FSDP2's default device mesh is the accelerator's (``torch._C._get_accelerator``): CUDA, as for the program, so its
``DeviceMesh``, its DTensors and its device handle are ``"cuda"``'s, as on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from torchdevice.callers import tell_as_program, told_the_truth
from torchdevice.device.aten import cpp_device
from torchdevice.patching import Patcher
from torchdevice.simulated.device import NAME, current

CPU = torch.device("cpu")


def activate(patcher: Patcher) -> None:
    """Give ``torch._C`` the functions until ``patcher.restore()`` (a CPU build lacks them; a CUDA build's would ask
    the CUDA driver of the simulated GPU's tensors), and answer ``parallel_apply`` and FSDP as the program is
    answered."""
    for name, function in FUNCTIONS.items():
        patcher.set(torch._C, name, function)
    tell_as_program(patcher, ("torch.nn.parallel.parallel_apply",), packages=("torch.distributed.fsdp",))
    patcher.set(torch._C, "_get_accelerator", _accelerator(torch._C._get_accelerator))


def _accelerator(truth: Callable[[bool], torch.device]) -> Callable[[bool], torch.device]:
    """``torch._C._get_accelerator`` answering CUDA to the program and to the modules answered as it is (FSDP2's
    default device mesh), the backend itself (``simulated``) to torch's own code."""
    def _get_accelerator(check: bool = False) -> torch.device:
        return truth(check) if told_the_truth("_C._get_accelerator") else torch.device("cuda")

    return _get_accelerator


def _device(index: int) -> torch.device:
    return CPU if index == -1 else torch.device(NAME, index)


def _index(tensor: torch.Tensor) -> int:
    found = cpp_device(tensor)
    return found.index if found.type == NAME and found.index is not None else -1


def _check_on_gpus(tensors: Sequence[torch.Tensor], what: str) -> None:
    for i, t in enumerate(tensors):
        if _index(t) == -1:
            raise RuntimeError(f"Expected all {what} tensors to be CUDA tensors, but {what} tensor at index {i} has "
                               f"device 'cpu'")


def _wrap(dim: int, tensor: torch.Tensor) -> int:
    rank = max(tensor.dim(), 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    return dim % rank


def _broadcast(tensor: torch.Tensor, devices: Sequence[int]) -> list[torch.Tensor]:
    source = _index(tensor)
    out = []
    for device in devices:
        if device < 0:
            raise RuntimeError(f"Expected non-negative device index, but got {device}")
        out.append(tensor if device == source else torch.empty_like(tensor, device=_device(device)))
    _broadcast_out(tensor, [t for t in out if t is not tensor])
    return out


def _broadcast_out(tensor: torch.Tensor, out: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
    _check_on_gpus(out, "output")
    for i, t in enumerate(out):
        if t.shape != tensor.shape:
            raise RuntimeError(f"Expected all output tensors to have same shape as the source tensor "
                               f"{list(tensor.shape)}, but output tensor at index {i} has shape {list(t.shape)}")
        t.copy_(tensor, non_blocking=True)
    return out


def _broadcast_coalesced(tensors: Sequence[torch.Tensor], devices: Sequence[int],
                         buffer_size: int = 10485760) -> list[list[torch.Tensor]]:
    if not devices:
        raise RuntimeError("devices can't be empty")
    if any(_index(t) != devices[0] for t in tensors):
        raise RuntimeError(f"All tensors must be on devices[0]: {devices[0]}")
    with torch.no_grad():
        return [list(tensors), *([t.to(_device(d), copy=True) for t in tensors] for d in devices[1:])]


def _scatter(tensor: torch.Tensor, devices: Sequence[int], chunk_sizes: Sequence[int] | None = None, dim: int = 0,
             streams: Any = None) -> tuple[torch.Tensor, ...]:
    if not devices:
        raise RuntimeError("Expected at least one device to scatter to")
    if chunk_sizes is not None and len(chunk_sizes) != len(devices):
        raise RuntimeError(f"Expected devices and chunk_sizes to be of same length, but got len(devices) = "
                           f"{len(devices)} and len(chunk_sizes) = {len(chunk_sizes)}")
    dim = _wrap(dim, tensor)
    chunks = tensor.split(list(chunk_sizes), dim) if chunk_sizes is not None else tensor.chunk(len(devices), dim)
    source = _index(tensor)
    return tuple(c if devices[i] == source else c.to(_device(devices[i]), non_blocking=True)
                 for i, c in enumerate(chunks))


def _scatter_out(tensor: torch.Tensor, out: Sequence[torch.Tensor], dim: int = 0,
                 streams: Any = None) -> Sequence[torch.Tensor]:
    if not out:
        raise RuntimeError("Expected at least one output tensor to scatter to")
    dim = _wrap(dim, tensor)
    sizes = [t.size(dim) for t in out]
    if sum(sizes) != tensor.size(dim):
        raise RuntimeError(f"Total size for output tensors along scatter dim ({sum(sizes)}) does not match total size "
                           f"of the input tensor ({tensor.size(dim)})")
    for t, chunk in zip(out, tensor.split(sizes, dim), strict=True):
        t.copy_(chunk, non_blocking=True)
    return out


def _gather(tensors: Sequence[torch.Tensor], dim: int = 0, destination: int | None = None) -> torch.Tensor:
    shape = _gathered_shape(tensors, dim)
    device = _device(current() if destination is None else destination)
    out = torch.empty(shape, dtype=tensors[0].dtype, device=device)
    return _gather_out(tensors, out, dim)


def _gather_out(tensors: Sequence[torch.Tensor], out: torch.Tensor, dim: int = 0) -> torch.Tensor:
    if list(out.shape) != _gathered_shape(tensors, dim):
        raise RuntimeError(f"Expected out tensor to have shape {_gathered_shape(tensors, dim)}, but got "
                           f"{list(out.shape)}")
    dim = _wrap(dim, tensors[0])
    start = 0
    for t in tensors:
        out.narrow(dim, start, t.size(dim)).copy_(t, non_blocking=True)
        start += t.size(dim)
    return out


def _gathered_shape(tensors: Sequence[torch.Tensor], dim: int) -> list[int]:
    if not tensors:
        raise RuntimeError("Expected at least one tensor to gather from")
    _check_on_gpus(tensors, "input")
    first = tensors[0]
    dim = _wrap(dim, first)
    expected = list(first.shape)
    total = 0
    for i, t in enumerate(tensors):
        if t.dim() != len(expected):
            raise RuntimeError(f"Expected all input tensors to have the same number of dimensions, but tensor at "
                               f"index {i}has {t.dim()} dimensions, (expected {len(expected)})")
        expected[dim] = t.size(dim)
        if list(t.shape) != expected:
            raise RuntimeError(f"Input tensor at index {i} has invalid shape {list(t.shape)}, but expected {expected}")
        total += t.size(dim)
    expected[dim] = total
    return expected


FUNCTIONS = {"_broadcast": _broadcast, "_broadcast_out": _broadcast_out, "_broadcast_coalesced": _broadcast_coalesced,
             "_scatter": _scatter, "_scatter_out": _scatter_out, "_gather": _gather, "_gather_out": _gather_out}
"""``torch._C``'s functions of ``torch/csrc/cuda/comm.cpp`` that ``torch.nn.parallel.comm`` calls."""
