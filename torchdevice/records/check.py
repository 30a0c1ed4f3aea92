"""The record of ``torchdevice_generated.check_table.MISSING_ON_MPS``: a public entry that falls back on MPS; the
targets ``torchdevice check`` answers for.

``codegen/plan/check.py`` finds them and renders each as a row of the table; ``torchdevice.check.knowledge``
builds the record back from its row.
"""

from __future__ import annotations

from dataclasses import dataclass

TARGETS = ("mps", "cpu", "mps-sim", "cuda-sim")
"""``mps-sim``: the simulated MPS target (the CPU with MPS's missing kernels), which lacks what MPS lacks;
``cuda-sim``: the simulated NVIDIA GPU, whose lacks the check table does not list (a few dozen rare overloads)."""


@dataclass(frozen=True)
class MissingCall:
    """A public entry that reaches aten ops MPS has no kernel for."""

    name: str
    ops: tuple[str, ...]
    """The aten ops it reaches that have no MPS kernel."""
    always: bool
    """Every op it reaches is missing: each call falls back, not only some."""
    mlx: bool
    """Every missing op has a verified MLX route."""
