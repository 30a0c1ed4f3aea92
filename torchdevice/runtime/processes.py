"""Every process of a redirected program is redirected: the installation it inherits through the environment.

While the runtime is installed (and not passing through to real CUDA), ``os.environ``, which every
process the program starts inherits (spawn and forkserver children, ``torch.multiprocessing.spawn``
ranks, DataLoader workers, ``ProcessPoolExecutor``, ``subprocess`` pythons, torchrun and pytest-xdist
workers), holds ``TORCHDEVICE_INSTALL``: the start-up hook installed with the package
(``torchdevice.pth`` runs ``_torchdevice_startup``) makes such a process install
(:func:`torchdevice.runtime.activation.install_inherited`) as soon as it imports torch, before its own code can
use torch.

The value says how this process installed: ``target=cpu`` (the target it resolved, so that no child
chooses another), with ``devices=N`` where the number of emulated devices was given to ``install()``
(``torchdevice run --devices N``; where it comes from ``TORCHDEVICE_DEVICES``, children inherit that
variable anyway), ``prefer_mlx=1`` where MLX is preferred, and ``report=DIR`` (URL-quoted) while the
program's report is being made (:mod:`torchdevice.reporting.program`): the child writes its entry there.
``TORCHDEVICE_INSTALL=1`` (by hand) installs with the defaults. The variables ``install()`` reads itself
are never changed, so an installation does not alter what the next ``install()`` in this process resolves.

``uninstall()`` removes the variable: processes started after it are not redirected. With
``TORCHDEVICE_INSTALL=0`` set beforehand nothing is propagated: the runtime stays in the process
that installed it.
"""

from __future__ import annotations

import os
import sys
from typing import Any
from urllib.parse import quote, unquote

from _torchdevice_startup import VARIABLE
from torchdevice.patching import Patcher

KEYS = ("target", "devices", "prefer_mlx", "gpu", "gpu_memory", "report")


def propagate(patcher: Patcher, target: str, prefer_mlx: bool, devices: int | None, gpu: str | None = None,
              gpu_memory: str | int | None = None) -> None:
    """Set ``TORCHDEVICE_INSTALL`` for processes started from now on (``target``: the target's name);
    ``patcher.restore()`` removes it."""
    if os.environ.get(VARIABLE) == "0":
        return
    os.environ[VARIABLE] = encode(target, devices, prefer_mlx, gpu, gpu_memory)
    patcher.defer(_forget)
    join_report()


def encode(target: str | None, devices: int | None = None, prefer_mlx: bool = False, gpu: str | None = None,
           gpu_memory: str | int | None = None) -> str:
    """The value of ``TORCHDEVICE_INSTALL`` that installs with these options (``1``: the defaults)."""
    items = {"target": target, "devices": devices, "prefer_mlx": 1 if prefer_mlx else None, "gpu": gpu,
             "gpu_memory": gpu_memory}
    return ",".join(f"{key}={value}" for key, value in items.items() if value is not None) or "1"


def join_report() -> None:
    """Name the report's directory in ``TORCHDEVICE_INSTALL`` (set by an installation), so that processes
    started from now on join the program's report."""
    reporting = sys.modules.get("torchdevice.reporting.program")
    directory = reporting.directory() if reporting is not None else None
    value = os.environ.get(VARIABLE)
    if directory is None or value is None or value.strip() in ("0", "1"):
        return
    items = [item for item in value.split(",") if not item.startswith("report=")]
    os.environ[VARIABLE] = ",".join([*items, f"report={quote(directory)}"])


def _forget() -> None:
    os.environ.pop(VARIABLE, None)


def decode(value: str) -> dict[str, Any]:
    """``"target=cuda-sim,devices=2,gpu=T4"`` -> ``install()``'s arguments (and ``report``: the report's
    directory); ``"1"`` -> ``{}``."""
    if value.strip() == "1":
        return {}
    arguments: dict[str, Any] = {}
    for item in value.split(","):
        key, _, text = item.strip().partition("=")
        if key not in KEYS or not text:
            raise ValueError(f"expected 1 or key=value items with keys {', '.join(KEYS)}, not {item!r}")
        if key in ("target", "gpu", "gpu_memory"):
            arguments[key] = text
        elif key == "report":
            arguments[key] = unquote(text)
        elif not text.isdigit():
            raise ValueError(f"{key} must be a whole number, not {text!r}")
        else:
            arguments[key] = int(text) if key == "devices" else text == "1"
    return arguments
