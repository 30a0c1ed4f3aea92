"""The NVIDIA cards a simulated GPU can be (``catalog/overlays/gpus.yaml``), as torch reports them on real cards.

One record per ``--gpu`` name: what ``torch.cuda.get_device_properties(0)`` says there (``name``, ``major.minor``,
``total_memory`` in MiB as torch prints it: the bytes // 2**20, ``multi_processor_count``), where that was seen and a
public log of it::

    T4: {name: Tesla T4, capability: [7, 5], memory_mib: 15095, multiprocessors: 40,
         seen: "torch 2.x on Colab, driver 550.54.15", source: https://github.com/...}
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuRule:
    name: str
    capability: tuple[int, int]
    memory_mib: int
    multiprocessors: int
    seen: str
    """The tool that printed the figures and the driver it ran with."""
    source: str
    """A public log of them: a URL, or ``owner/repository:path@commit``."""
    default: bool = False
    """The card a simulated GPU is unless another is asked for (exactly one)."""

    def __post_init__(self) -> None:
        if self.memory_mib <= 0 or self.multiprocessors <= 0:
            raise ValueError("memory_mib and multiprocessors: more than 0")
        if not self.source.strip() or not self.seen.strip():
            raise ValueError("seen and source: where the figures were seen, and a public log of them")
