"""DeepSpeed on simulated GPUs (the GPU's profile, ``cuda-sim``): its CUDA accelerator, with its CPU ops.

On the cpu target and the simulated Mac DeepSpeed is told the truth about CUDA (``catalog/overlays/packages.yaml``)
and takes the machine's accelerator. On a simulated GPU the truth is a GPU: DeepSpeed is answered as the program is,
takes its CUDA accelerator (``cuda:i``, NCCL, CUDA's streams and memory statistics, all emulated), and keeps the
model on the device. Its CUDA accelerator would compile its kernels (``FusedAdam``...) with nvcc for the GPU's
architecture; it builds the CPU accelerator's instead, with the host's compiler, and those compute on the simulated
device's memory (the host's) as they compute on the CPU's.
"""

from __future__ import annotations

from typing import Any

from torchdevice.callers import tell_as_program
from torchdevice.patching import Patcher


def activate(patcher: Patcher) -> None:
    """Until ``patcher.restore()``: DeepSpeed answered as the program is, its CUDA accelerator building CPU ops."""
    tell_as_program(patcher, packages=("deepspeed",))
    patcher.after_import("deepspeed.accelerator.cuda_accelerator", lambda module: _cpu_ops(patcher, module))


def _cpu_ops(patcher: Patcher, module: Any) -> None:
    from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator

    cpu = CPU_Accelerator()
    patcher.set(module.CUDA_Accelerator, "get_op_builder", lambda self, name: cpu.get_op_builder(name))
    patcher.set(module.CUDA_Accelerator, "create_op_builder", lambda self, name: cpu.create_op_builder(name))
