"""The NVIDIA cards a simulated GPU can be (``--gpu T4``, ``TORCHDEVICE_GPU``), or its memory alone
(``--gpu-memory 1GiB``, ``TORCHDEVICE_GPU_MEMORY``): what ``torch.cuda.get_device_name``, ``get_device_properties``,
``get_device_capability`` and ``is_bf16_supported`` answer, and how much memory the program may allocate.

The cards (:data:`CARDS`, generated from ``catalog/overlays/gpus.yaml``) are what torch reports on real cards, each
with its source: memory is ``torch.cuda.get_device_properties(0).total_memory``. The default is :data:`DEFAULT`, the
T4 of Colab's and Kaggle's free tiers, where most CUDA notebooks run.
"""

from __future__ import annotations

import dataclasses
import os
import re

from torchdevice_generated.gpus_table import CARDS, DEFAULT

from torchdevice.records.gpus import Gpu

GPU_VARIABLE = "TORCHDEVICE_GPU"
MEMORY_VARIABLE = "TORCHDEVICE_GPU_MEMORY"
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?I?B?)\s*", re.IGNORECASE)


def choose(gpu: str | Gpu | None = None, memory: str | int | None = None) -> Gpu:
    """The card named ``gpu`` (else ``$TORCHDEVICE_GPU``, else :data:`DEFAULT`; a :class:`Gpu` is itself), with
    ``memory`` bytes (``"1GiB"``; else ``$TORCHDEVICE_GPU_MEMORY``) where given; an unknown card or a malformed size
    raises ``ValueError`` naming it and where it came from."""
    if isinstance(gpu, Gpu):
        return gpu if memory is None else dataclasses.replace(gpu, memory=parse_size(memory))
    name = gpu or os.environ.get(GPU_VARIABLE) or DEFAULT
    card = _card(name, "" if gpu else f" ({GPU_VARIABLE}={name})")
    size = memory if memory is not None else os.environ.get(MEMORY_VARIABLE) or None
    if size is None:
        return card
    source = "" if memory is not None else f" ({MEMORY_VARIABLE}={size})"
    return dataclasses.replace(card, memory=parse_size(size, source))


def _card(name: str, source: str) -> Gpu:
    for key, card in CARDS.items():
        if name.replace(" ", "").upper() == key.upper():
            return card
    raise ValueError(f"torchdevice: unknown GPU {name!r}{source}; known: {', '.join(CARDS)}")


def parse_size(size: str | int, source: str = "") -> int:
    """Bytes of ``size``: a number of bytes, or one with a unit (``512MiB``, ``1.5GiB``, ``16GB``)."""
    if isinstance(size, int) and not isinstance(size, bool):
        value = size
    else:
        match = _SIZE.fullmatch(str(size))
        if match is None:
            raise ValueError(f"torchdevice: GPU memory {size!r}{source} is not a size (such as 16GB or 1GiB)")
        value = int(float(match[1]) * _UNITS[match[2].upper()])
    if value <= 0:
        raise ValueError(f"torchdevice: GPU memory {size!r}{source} must be more than 0 bytes")
    return value


VERDICTS = ("fits", "may fit", "does not fit")
"""Whether a run fits a card, best first (:func:`verdict`)."""


def verdict(peak_reserved: int, peak_allocated: int, memory: int) -> str:
    """Whether a GPU whose caching allocator reserved ``peak_reserved`` bytes at most (``peak_allocated`` in use)
    fits a card of ``memory`` bytes: it fits where the card holds the peak reserved; it may fit where the card holds
    only the peak allocated (CUDA's allocator gives its cache back and retries before failing, with another
    fragmentation than this run's); else not."""
    if peak_reserved <= memory:
        return VERDICTS[0]
    return VERDICTS[1] if peak_allocated <= memory else VERDICTS[2]

