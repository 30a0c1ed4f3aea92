"""What each public ``torch.cuda`` entry does on a non-CUDA target (``catalog/overlays/cuda.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class CudaRule:
    """The emulation of one ``torch.cuda`` entry."""

    policy: Literal["emulate", "unsupported", "passthrough"] | None = None
    does: str = ""
    """What the emulation does, in the emulation table's vocabulary."""
