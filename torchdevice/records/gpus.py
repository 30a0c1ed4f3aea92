"""An NVIDIA card a simulated GPU can be: the row of the generated card table (``torchdevice_generated.gpus_table``,
from ``catalog/overlays/gpus.yaml``) that :mod:`torchdevice.device.gpus` chooses from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    key: str
    """Its name for ``--gpu`` (``T4``)."""
    name: str
    """What ``torch.cuda.get_device_name()`` says (``Tesla T4``)."""
    capability: tuple[int, int]
    memory: int
    """Bytes: ``get_device_properties(0).total_memory`` on the card."""
    multiprocessors: int
    seen: str = ""
    """Where its figures were seen (the driver moves the memory by a few MiB)."""
    source: str = ""
    """A public log of them."""
