"""The libraries a GPU's torch brings, on simulated GPUs: cuDNN (``torch.backends.cudnn``) and NCCL
(``torch.cuda.nccl``), the versions the installed release's CUDA wheel on PyPI requires (:data:`CUDA_WHEELS`; torch
2.13.0's: ``nvidia-cudnn-cu13==9.20.0.48``, ``nvidia-nccl-cu13==2.29.7``).

cuDNN: ``is_available()`` is True, ``version()`` that cuDNN's (92000 on torch 2.13; or, as torch says for this cuDNN,
an error on a card below compute capability 7.5), ``is_acceptable(t)`` torch's own answer for the tensor the program
sees (True for a ``cuda`` half, float or double tensor while ``torch.backends.cudnn.enabled``), ``benchmark_limit`` 10;
the flags (``enabled``, ``benchmark``, ``deterministic``) are torch's own. What the device computes stays its kernels':
torch's own code sees its tensors as they are, so ``RNNBase.flatten_parameters`` leaves the weights where they are and
the recurrent layers compute as the CPU computes them.

NCCL: ``torch._C`` gets the collectives ``torch.cuda.nccl`` calls (``nn.DataParallel``'s gradients are summed by
``nccl.reduce``, as on a GPU, and its CPU-build warning is gone), each computing on the devices' memory what NCCL
computes (its reduce ops: :mod:`torchdevice.distributed.reduce_ops`), after NCCL's checks;
``torch.cuda.nccl.version()`` is that NCCL's ((2, 29, 7) on torch 2.13).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.backends
import torch.backends.cudnn
import torch.cuda.nccl
from torch.distributed import ReduceOp

from torchdevice.callers import tell_as_program
from torchdevice.device.aten import cpp_device
from torchdevice.distributed import reduce_ops
from torchdevice.patching import Patcher
from torchdevice.releases import release
from torchdevice.simulated.device import NAME
from torchdevice.simulated.profile import Profile

CUDA_WHEELS = {(2, 10): (91002, (2, 27, 5)), (2, 11): (91900, (2, 28, 9)), (2, 12): (92000, (2, 29, 7)),
               (2, 13): (92000, (2, 29, 7)), (2, 14): (92400, (2, 30, 7)), (2, 15): (92600, (2, 30, 7))}
"""Per release, the cuDNN (as ``torch.backends.cudnn.version()`` says it: 9.20.0 is 92000) and NCCL versions its CUDA
wheel on PyPI requires (``nvidia-cudnn-cu1x``, ``nvidia-nccl-cu1x`` in its metadata; its own answers on a CUDA build);
a newer release: the newest known's."""
CUDNN_VERSION, NCCL_VERSION = CUDA_WHEELS.get(release(), CUDA_WHEELS[max(CUDA_WHEELS)])
BENCHMARK_LIMIT = 10
"""How many cuDNN algorithms ``benchmark`` tries at most, until the program sets it (torch's default)."""
_OPS = ("SUM", "PRODUCT", "MAX", "MIN", "AVG")
"""``ncclRedOp_t``'s operations, by number, as ``torch.distributed.ReduceOp`` names them."""
_COMBINED: dict[Any, Callable[..., torch.Tensor]] = {
    ReduceOp.SUM: torch.add, ReduceOp.PRODUCT: torch.mul, ReduceOp.MAX: torch.maximum, ReduceOp.MIN: torch.minimum}
"""How two ranks' values combine under each reduce op that :func:`.reduce_ops.reduction` leaves."""


def activate(patcher: Patcher, profile: Profile) -> None:
    """cuDNN and NCCL as on ``profile``'s card until ``patcher.restore()``."""
    cudnn = sys.modules["torch.backends.cudnn"].m  # the module under torch's ``PropModule``: its functions' globals
    patcher.set(cudnn, "is_available", lambda: True)
    patcher.set(cudnn, "_init", lambda: _loaded(profile))
    patcher.set(cudnn, "__cudnn_version", CUDNN_VERSION)
    limit = [BENCHMARK_LIMIT]
    patcher.set(torch._C, "_cuda_get_cudnn_benchmark_limit", lambda: limit[0])
    patcher.set(torch._C, "_cuda_set_cudnn_benchmark_limit", lambda value: limit.__setitem__(0, int(value)))
    patcher.set(type(torch.backends.cudnn), "benchmark_limit", torch.backends.ContextProp(
        torch._C._cuda_get_cudnn_benchmark_limit, torch._C._cuda_set_cudnn_benchmark_limit))
    for name, function in NCCL.items():
        patcher.set(torch._C, name, function)
    # their checks read the tensors' device as the program sees it (``cuda``), as on a GPU
    tell_as_program(patcher, ("torch.backends.cudnn", "torch.cuda.nccl"))


def _loaded(profile: Profile) -> bool:
    """cuDNN loaded, as torch's ``torch.backends.cudnn._init`` checks it: from 9.11, cards from 7.5 only."""
    if CUDNN_VERSION >= 91100 and profile.gpu is not None and profile.gpu.capability < (7, 5):
        raise RuntimeError(f"cuDNN version {CUDNN_VERSION} is not compatible with devices with SM < 7.5. "
                           "Please install a version of PyTorch with a compatible cuDNN version. "
                           "https://github.com/pytorch/pytorch/blob/main/RELEASE.md#release-compatibility-matrix")
    return True


def _check(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor | None], input_multiplier: int = 1,
           output_multiplier: int = 1) -> None:
    """NCCL's checks of a collective's tensors (``torch/csrc/cuda/nccl.cpp``: ``check_inputs``); None: an output
    only the root has."""
    if not inputs:
        raise RuntimeError("input sequence can't be empty")
    if len(inputs) != len(outputs):
        raise RuntimeError(f"inputs and outputs sequences have to be of the same length, but got input of length "
                           f"{len(inputs)} and output of length {len(outputs)}")
    devices: set[int | None] = set()
    numel, dtype = inputs[0].numel(), inputs[0].dtype
    for t, out in zip(inputs, outputs, strict=True):
        pair = [t] if out is None else [t, out]
        if any(cpp_device(x).type != NAME or x.is_sparse for x in pair):
            raise RuntimeError("input and output elements have to be cuda dense Tensors")
        if any(x.dtype != dtype for x in pair):
            raise RuntimeError("all inputs and outputs must be of the same Tensor dtype")
        if not all(x.is_contiguous() for x in pair):
            raise RuntimeError("all inputs and outputs have to be contiguous")
        if out is not None and cpp_device(out) != cpp_device(t):
            raise RuntimeError("input and output must be on the same device")
        if t.numel() != numel:
            raise RuntimeError("all inputs must have the same number of elements")
        if out is not None and out.numel() * output_multiplier != numel * input_multiplier:
            raise RuntimeError("output must be of size input_size * size_multiplier")
        if cpp_device(t).index in devices:
            raise RuntimeError("inputs must be on unique devices")
        devices.add(cpp_device(t).index)


def _reduced(inputs: Sequence[torch.Tensor], op: int, device: torch.device, collective: str) -> torch.Tensor:
    """The inputs reduced by NCCL's ``op``, as NCCL computes it (:func:`.reduce_ops.reduction`), on ``device``."""
    how = reduce_ops.reduction(getattr(ReduceOp, _OPS[op]), inputs[0].dtype, len(inputs), collective)
    with torch.no_grad():
        wire = functools.reduce(_COMBINED[how.op], [how.send(t.to(device, copy=True), in_place=True) for t in inputs])
        out = torch.empty_like(inputs[0], device=device)
        how.receive(wire, out)
        return out


def _reduce(inputs: Sequence[torch.Tensor], output: torch.Tensor, root: int = 0, op: int = 0, streams: Any = None,
            comms: Any = None) -> None:
    _check(inputs, [output if i == root else None for i in range(len(inputs))])
    output.copy_(_reduced(inputs, op, cpp_device(output), "reduce"))


def _all_reduce(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], op: int = 0, streams: Any = None,
                comms: Any = None) -> None:
    _check(inputs, outputs)
    reduced = _reduced(inputs, op, cpp_device(outputs[0]), "all_reduce")
    for out in outputs:
        out.copy_(reduced)


def _broadcast(inputs: Sequence[torch.Tensor], root: int = 0, streams: Any = None, comms: Any = None) -> None:
    _check(inputs, inputs)
    for i, t in enumerate(inputs):
        if i != root:
            t.copy_(inputs[root])


def _all_gather(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], streams: Any = None,
                comms: Any = None) -> None:
    _check(inputs, outputs, len(inputs), 1)
    for out in outputs:
        out.view(-1).copy_(torch.cat([t.reshape(-1).to(cpp_device(out)) for t in inputs]))


def _reduce_scatter(inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], op: int = 0, streams: Any = None,
                    comms: Any = None) -> None:
    _check(inputs, outputs, 1, len(inputs))
    reduced = _reduced(inputs, op, cpp_device(inputs[0]), "reduce_scatter").view(-1).chunk(len(outputs))
    for out, part in zip(outputs, reduced, strict=True):
        out.view(-1).copy_(part)


NCCL = {"_nccl_version": lambda: (NCCL_VERSION[0] << 32) | (NCCL_VERSION[1] << 16) | NCCL_VERSION[2],
        "_nccl_version_suffix": lambda: b"", "_nccl_reduce": _reduce, "_nccl_all_reduce": _all_reduce,
        "_nccl_broadcast": _broadcast, "_nccl_all_gather": _all_gather, "_nccl_reduce_scatter": _reduce_scatter}
"""``torch._C``'s functions of ``torch/csrc/cuda/python_nccl.cpp`` that ``torch.cuda.nccl`` calls."""
