"""The simulated Mac (``--target mps-sim``): Apple silicon as torch 2.13 runs it, on any machine.

:func:`activate` is its one activation point: the runtime calls it for the ``mps-sim`` target and gets the
:class:`~torchdevice.device.target.Target` everything else then asks. Its modules:

- :mod:`.device`: the device in torch, ``PyTorch's PrivateUse1`` backend named ``mps_sim``, holding host memory:
  device tensors are real tensors of a backend torch knows;
- :mod:`.kernels`: MPS's kernels simulated on it: computed on the host, refusing what MPS refuses (missing kernels,
  float64, MPS's limits, host tensors mixed in), for the fallback engine to complete as it completes MPS on a Mac;
- :mod:`.presentation`: what the program sees (``mps:0``, ``torch.backends.mps``, ``torch.mps``, checkpoints).

The simulated macOS version is :func:`torchdevice.device.limits.macos` (``TORCHDEVICE_MACOS=15.1``; by default 14.0,
the oldest macOS torch 2.13 supports, which refuses the most). What it cannot show: speed and memory use (the CPU
computes everything).
"""

from __future__ import annotations

from torchdevice.device.target import SIMULATED_MPS, Target
from torchdevice.patching import Patcher
from torchdevice.simulated import internals, presentation
from torchdevice.simulated.kernels import SimulatedMPS


def activate(patcher: Patcher) -> Target:
    """Simulate Apple silicon until ``patcher.restore()``; the target it is."""
    internals.check(SIMULATED_MPS)
    sim = SimulatedMPS.apple(SIMULATED_MPS)
    library = sim.register()
    patcher.defer(library._destroy)
    presentation.activate(patcher, sim.macos)
    return sim.target()
