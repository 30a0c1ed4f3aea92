"""``torchdevice kernel install|uninstall|list``: a Jupyter kernelspec, "Python 3 (torchdevice)", whose kernel runs
every cell under the runtime, so that a CUDA notebook opened in JupyterLab, Notebook or VS Code runs unmodified.

The kernel is ipykernel on this Python (as ``python -m ipykernel install`` registers it), with
``TORCHDEVICE_INSTALL`` in its environment (``env`` of ``kernel.json``): the start-up hook installed with the
package (:mod:`torchdevice.runtime.processes`) installs the runtime, with the kernelspec's target and options, as
soon as the kernel imports torch, before any cell uses it, and in every process the kernel starts. The files are
installed, listed and removed by ``jupyter_client``'s ``KernelSpecManager``, in Jupyter's own directories
(``--user``: ``jupyter --data-dir``; ``--sys-prefix``: this environment's; ``--prefix``: another one's). A
kernelspec is torchdevice's when its ``metadata.torchdevice`` says so; no other is removed.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from _torchdevice_startup import VARIABLE
from torchdevice.notebooks import require
from torchdevice.notebooks.execute import DISPLAY_NAME, kernel_command
from torchdevice.runtime.processes import encode

NAME = "torchdevice"


@dataclass(frozen=True)
class Installed:
    name: str
    directory: str
    display_name: str
    install: str
    """Its ``TORCHDEVICE_INSTALL``: how its kernel installs the runtime."""


def spec(target: str | None, devices: int | None) -> dict[str, Any]:
    """The ``kernel.json`` of a kernel that runs under the runtime with this target and number of devices."""
    shown = ", ".join(str(v) for v in (target, f"{devices} devices" if devices else None) if v)
    return {
        "argv": kernel_command(),
        "display_name": f"{DISPLAY_NAME[:-1]}, {shown})" if shown else DISPLAY_NAME,
        "language": "python",
        "env": {VARIABLE: encode(target, devices)},
        "metadata": {"debugger": True, NAME: {"target": target, "devices": devices}},
    }


def install(name: str, target: str | None, devices: int | None, user: bool, prefix: str | None) -> str:
    """Install the kernelspec ``name`` (for this user, or under ``prefix``); the directory it is in."""
    require("ipykernel")  # the kernel the spec starts
    manager = require("jupyter_client.kernelspec").KernelSpecManager()
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "kernel.json"), "w", encoding="utf-8") as f:
            json.dump(spec(target, devices), f, indent=1)
        return str(manager.install_kernel_spec(folder, kernel_name=name, user=user, prefix=prefix))


def installed() -> list[Installed]:
    """torchdevice's kernelspecs that Jupyter finds, by name."""
    manager = require("jupyter_client.kernelspec").KernelSpecManager()
    found = []
    for name, entry in sorted(manager.get_all_specs().items()):
        kernel = entry.get("spec", {})
        if NAME in (kernel.get("metadata") or {}):
            found.append(Installed(name, entry["resource_dir"], kernel.get("display_name", ""),
                                   (kernel.get("env") or {}).get(VARIABLE, "")))
    return found


def uninstall(name: str) -> str:
    """Remove torchdevice's kernelspec ``name`` (the first Jupyter finds); the directory removed. Raises
    LookupError when Jupyter finds no such kernelspec of torchdevice's."""
    chosen = next((k for k in installed() if k.name == name), None)
    if chosen is None:
        raise LookupError(f"no kernelspec {name!r} of torchdevice's is installed (`torchdevice kernel list`)")
    return str(require("jupyter_client.kernelspec").KernelSpecManager().remove_kernel_spec(name))
