"""What each public ``torch.cuda`` entry does on a non-CUDA target (``catalog/overlays/cuda.yaml``).

Entries under ``torch.cuda`` default to policy ``emulate`` and must name their emulation; entries
elsewhere (``torch.backends.cuda``) may get a rule too. One record per entry::

    torch.cuda.synchronize: {does: synchronize}
    torch.cuda.get_arch_list: {does: constant, value: []}
    torch.cuda.graph: {policy: unsupported, why: CUDA graph capture records CUDA kernels}
    torch.cuda.amp.autocast: {policy: passthrough, does: torch.autocast is translated}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class CudaRule:
    """The emulation of one ``torch.cuda`` entry."""

    policy: Literal["emulate", "unsupported", "passthrough"] | None = None
    does: str = ""
    """``emulate``: a word of the emulation vocabulary (``torchdevice.runtime.emulation.VOCABULARY``); the
    runtime installs what the word builds from ``value``. ``passthrough``: why the original works."""
    value: Any = None
    """The argument of the word's builder: the constant returned (``constant``), a dtype name
    (``tensor_type``)."""
    why: str = ""
    """``unsupported``: why it cannot be emulated; the error raised on use says it."""
    sample: str = ""
    """Arguments (Python source) the generated test calls the emulation with, when it needs any."""
