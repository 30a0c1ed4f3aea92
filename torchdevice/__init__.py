"""torchdevice: run CUDA-written PyTorch code unmodified on MPS, MLX or CPU.

``install()`` makes ``"cuda"`` mean the best device present (MPS, else CPU; real CUDA is left alone)
until ``uninstall()``; ``installed()`` does both around a block; ``torchdevice run SCRIPT`` runs a
program with the runtime active. Importing this package is cheap: torch is imported on first use.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torchdevice.report import report as _report

if TYPE_CHECKING:
    import torch

__version__ = "0.1.0"
__all__ = ["__version__", "install", "installed", "report", "target", "uninstall"]


def install(target: str | torch.device | None = None, *, prefer_mlx: bool = False) -> torch.device:
    """Make ``"cuda"`` mean ``target`` (default: ``$TORCHDEVICE_TARGET``, else MPS, else CPU; real CUDA
    passes through). Returns that device. Idempotent and thread-safe; a different target reinstalls."""
    from torchdevice import runtime

    return runtime.install(target, prefer_mlx=prefer_mlx)


def uninstall() -> None:
    """Undo :func:`install`: every patched attribute gets back its identical original object."""
    runtime = sys.modules.get("torchdevice.runtime")
    if runtime is not None:
        runtime.uninstall()


@contextlib.contextmanager
def installed(target: str | torch.device | None = None, *, prefer_mlx: bool = False) -> Iterator[torch.device]:
    """Install for the duration of a ``with`` block, then restore whatever was active before."""
    from torchdevice import runtime

    before = (runtime.current_target(), runtime.options())
    device = runtime.install(target, prefer_mlx=prefer_mlx)
    try:
        yield device
    finally:
        previous, options = before
        if options is None:
            runtime.uninstall()
        else:
            runtime.install(previous, **options)


def target() -> torch.device:
    """The device ``"cuda"`` means now: the target while installed, else ``cuda`` itself."""
    from torchdevice import runtime

    return runtime.current_target()


def report() -> dict[str, Any]:
    """``{"redirects": {op: {route: n}}, "fallbacks": {op: {route: n}}}`` since start or the last reset."""
    runtime = sys.modules.get("torchdevice.runtime")
    if runtime is not None:
        runtime.flush()
    return _report()
