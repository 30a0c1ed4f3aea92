"""The simulated devices: Apple silicon (``--target mps-sim``) and NVIDIA GPUs (``--target cuda-sim``) as torch 2.13
runs them, on any machine.

:func:`activate` is their one activation point: the runtime calls it for a simulated target and gets the
:class:`~torchdevice.device.target.Target` everything else then asks. One machinery serves every simulated device;
what a device is, is its profile (:mod:`.profile`: :data:`.profile.PROFILES`, by target name), which also lists the
:data:`FEATURES` it turns on. Its modules:

- :mod:`.device`: the devices in torch, PyTorch's ``PrivateUse1`` backend named ``simulated``, holding host memory
  (:mod:`.backend`, its compiled part): device tensors are real tensors of a backend torch knows;
- :mod:`.kernels`: the device's kernels: computed on the host, refusing what the profile refuses (MPS: missing
  kernels, float64, MPS's limits; CUDA: the kernels it lacks, its determinism alerts), and tensors of two devices
  mixed, for the fallback engine to complete as it completes MPS on a Mac;
- :mod:`.presentation`: what the program sees (``mps:0``, ``cuda:1``, ``torch.backends.mps``, ``torch.mps``,
  checkpoints);
- :mod:`.profile`: what each device is (a GPU's card: :mod:`torchdevice.device.gpus`);
- :mod:`.sharing`: a GPU's tensors sent to other processes share their memory, as CUDA's IPC does;
- :mod:`.memory_tools`: torch's memory tools on a GPU: its history and snapshots (``torch.cuda.memory.
  _record_memory_history``), settings changed as the program runs;
- :mod:`.parallel`: torch's data-parallel wrappers on GPUs (``nn.DataParallel``'s copies between devices, FSDP);
- :mod:`.libraries`: the libraries a GPU's torch brings: cuDNN's answers, NCCL's collectives;
- :mod:`.deepspeed_gpu`: DeepSpeed's CUDA accelerator on GPUs, building its CPU ops.

The simulated macOS version is :func:`torchdevice.device.limits.macos` (``TORCHDEVICE_MACOS=15.1``; by default 14.0,
the oldest macOS torch 2.13 supports, which refuses the most). What they cannot show: speed (the CPU computes
everything).
"""

from __future__ import annotations

from collections.abc import Callable

from torchdevice.device import gpus
from torchdevice.device.target import Target
from torchdevice.patching import Patcher
from torchdevice.reporting import fit
from torchdevice.simulated import (
    deepspeed_gpu,
    device,
    internals,
    libraries,
    memory_tools,
    parallel,
    presentation,
    sharing,
)
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import PROFILES, Profile


def _fit(patcher: Patcher, profile: Profile) -> None:
    if device.gpu_memory not in fit.SOURCES:
        fit.SOURCES.append(device.gpu_memory)


FEATURES: dict[str, Callable[[Patcher, Profile], None]] = {
    "fit": _fit,  # the report's "will it fit" (its peaks, kept after uninstall)
    "sharing": lambda patcher, profile: sharing.activate(patcher),  # CUDA's IPC
    "memory_tools": lambda patcher, profile: memory_tools.activate(patcher),  # _record_memory_history, _snapshot
    "parallel": lambda patcher, profile: parallel.activate(patcher),  # copies between devices (nn.DataParallel), FSDP
    "libraries": libraries.activate,  # cuDNN, NCCL
    "deepspeed_gpu": lambda patcher, profile: deepspeed_gpu.activate(patcher),  # DeepSpeed's CUDA accelerator
}
"""What a profile may turn on besides the machinery (:attr:`.Profile.features`), by name."""


def activate(patcher: Patcher, name: str, devices: int = 1, gpu: gpus.Gpu | None = None) -> Target:
    """Simulate target ``name`` (:data:`.profile.PROFILES`: ``mps-sim``; ``cuda-sim`` with ``devices`` GPUs of card
    ``gpu``) until ``patcher.restore()``; the target it is."""
    internals.check(name)
    if name not in PROFILES:
        raise ValueError(f"torchdevice: no simulated target {name!r}")
    sim = SimulatedKernels(PROFILES[name](devices, gpu), keep_raised=False, in_cpp=True)
    library = sim.register()
    patcher.defer(library._destroy)
    presentation.activate(patcher, sim.profile)
    for feature in sim.profile.features:
        FEATURES[feature](patcher, sim.profile)
    return sim.target()
