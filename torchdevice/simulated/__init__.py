"""The simulated Mac (``--target mps-sim``): Apple silicon as torch 2.13 runs it, on any machine.

:func:`activate` is its one activation point: the runtime calls it for the ``mps-sim`` target and gets the
:class:`~torchdevice.device.target.Target` everything else then asks. Its modules:

- :mod:`.kernels`: MPS's kernels simulated on the CPU through the dispatcher (the ops MPS lacks raise MPS's
  errors, float64 is refused), for the fallback engine to complete as it completes MPS on a Mac;
- :mod:`.tensors`: the device tensors, host memory that says it is on ``mps:0``, and their placement rules.

What it cannot show: speed, memory use (the CPU computes everything), and which exact kernels the C++ code of
an op picks on a Mac (torch's C++ sees CPU tensors).
"""

from __future__ import annotations

import torch

from torchdevice.device.target import SIMULATED_MPS, Target
from torchdevice.patching import Patcher
from torchdevice.simulated import tensors
from torchdevice.simulated.kernels import SimulatedMPS


def activate(patcher: Patcher) -> Target:
    """Simulate Apple silicon until ``patcher.restore()``; the target it is."""
    sim = SimulatedMPS.apple(SIMULATED_MPS)
    kernels = sim.register()
    memory = torch.library.Library("_", "IMPL")
    memory.fallback(tensors.allocate, "MPS", with_keyset=True)
    patcher.set(torch, "_has_compatible_shallow_copy_type", tensors.compatible(torch._has_compatible_shallow_copy_type))
    registry = torch.serialization._package_registry
    entry = (0, lambda obj: None, tensors.restore_on_host)
    registry.insert(0, entry)
    patcher.set(torch._utils, "_rebuild_tensor", tensors.rebuilt_on_device(torch._utils._rebuild_tensor))
    patcher.defer(lambda: registry.remove(entry))
    patcher.defer(memory._destroy)
    patcher.defer(kernels._destroy)
    return sim.target(tensors.DEVICE)
