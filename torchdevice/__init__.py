"""torchdevice: run CUDA-written PyTorch code unmodified on MPS, MLX or CPU.

``install()`` makes ``"cuda"`` mean the best device present (MPS, else a simulated GPU, else CPU; real CUDA is
left alone)
until ``uninstall()``, in this process and in every Python process it starts; ``installed()`` does
both around a block; ``torchdevice run SCRIPT`` runs a program with the runtime active. Importing
this package is cheap: torch is imported on first use.

Logging goes to the ``torchdevice`` logger, which has a ``NullHandler`` and the level WARNING, so a
program's ``logging.basicConfig(level=logging.INFO)`` shows none of its INFO records. Ask for them
with ``TORCHDEVICE_LOG=info`` (printed on stderr) or ``logging.getLogger("torchdevice").setLevel(...)``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torchdevice.reporting import counts as _counts
from torchdevice.version import __version__

if TYPE_CHECKING:
    import torch

__all__ = ["__version__", "install", "installed", "report", "target", "uninstall"]

_log = logging.getLogger(__name__)
_log.addHandler(logging.NullHandler())
if _log.level == logging.NOTSET:  # a level the program set before importing us stays
    _log.setLevel(logging.WARNING)


def install(target: str | torch.device | None = None, *, prefer_mlx: bool = False,
            devices: int | None = None, gpu: str | None = None, gpu_memory: str | int | None = None,
            report: str | os.PathLike[str] | None = None) -> torch.device:
    """Make ``"cuda"`` mean ``target`` (default: ``$TORCHDEVICE_TARGET``, else MPS, else a simulated GPU where its
    compiled backend builds, else CPU; real CUDA passes through), here and in every Python process started from now
    on. Returns that device.

    ``devices``: how many CUDA devices ``torch.cuda.device_count()`` reports, ``cuda:0`` to
    ``cuda:N-1``, each of them the target (default: ``$TORCHDEVICE_DEVICES``, else 1). Idempotent
    and thread-safe; a different target or option reinstalls. Call it before modules import torch
    functions by name (``from torch import zeros``): such names keep the originals (a warning names them).

    ``gpu``, ``gpu_memory``: for ``cuda-sim``, the NVIDIA card simulated (``"T4"``, ``"A100-40GB"``...; default
    ``$TORCHDEVICE_GPU``, else T4), or each GPU's memory (``"1GiB"``; default ``$TORCHDEVICE_GPU_MEMORY``, else the
    card's), which the program cannot exceed.

    ``report``: at exit, write what the runtime did in this process and every process it starts to this
    file (JSON; a self-contained HTML page for a name ending in ``.html``), and a summary on stderr
    (default: ``$TORCHDEVICE_REPORT``; see :mod:`torchdevice.reporting.program`).
    """
    from torchdevice.runtime import activation

    return activation.install(target, prefer_mlx=prefer_mlx, devices=devices, gpu=gpu, gpu_memory=gpu_memory,
                              report=report)


def uninstall() -> None:
    """Undo :func:`install`: every patched attribute gets back its identical original object, and
    processes started from now on are not redirected."""
    activation = sys.modules.get("torchdevice.runtime.activation")
    if activation is not None:
        activation.uninstall()


@contextlib.contextmanager
def installed(target: str | torch.device | None = None, *, prefer_mlx: bool = False,
              devices: int | None = None, gpu: str | None = None,
              gpu_memory: str | int | None = None) -> Iterator[torch.device]:
    """Install for the duration of a ``with`` block, then restore whatever was active before."""
    from torchdevice.runtime import activation

    before = activation.options()
    device = activation.install(target, prefer_mlx=prefer_mlx, devices=devices, gpu=gpu, gpu_memory=gpu_memory)
    try:
        yield device
    finally:
        if before is None:
            activation.uninstall()
        else:
            activation.install(**before)


def target() -> torch.device:
    """The device ``"cuda"`` means now: the target while installed, else ``cuda`` itself."""
    from torchdevice.runtime import activation

    return activation.current_target()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext torchdevice``: install in this IPython or Jupyter session, and add the ``%torchdevice`` magic
    (see :mod:`torchdevice.notebooks.extension`)."""
    from torchdevice.notebooks import extension

    extension.load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext torchdevice``: uninstall."""
    from torchdevice.notebooks import extension

    extension.unload(ipython)


def report() -> dict[str, Any]:
    """``{"redirects": {op: {route: n}}, "fallbacks": {op: {route: n}}, "standins": {name: {route: n}}}`` since
    start or the last reset (``standins``: the flash-attn, xformers and apex stand-ins used, per device type)."""
    _counts.flush()
    return _counts.report()
