"""torchdevice's start-up hook: a Python process started with ``TORCHDEVICE_INSTALL`` in its environment
(other than ``0``) installs torchdevice as soon as it imports torch, before its own code can use torch.

``torchdevice.pth`` (installed at the root of site-packages with the package) runs :func:`activate` at
interpreter start-up when the variable is present; an installed runtime sets it for every process the
program starts, saying how to install there (:mod:`torchdevice.runtime.processes`), the way
coverage.py follows subprocesses.

This module is top level, not part of the ``torchdevice`` package, because it is imported by every
such process, most of which never import torch: it imports nothing, and what it costs is one finder
on ``sys.meta_path`` that compares each imported name with ``"torch"`` and the packages the runtime may
stand in for (:data:`STANDINS`: ``from flash_attn import ...`` before torch installs first). When torch
is imported, the finder lets the finders after it locate torch, and has the loader run torch's
``__init__`` and then the installation.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported: it would cost every process more than this whole module
if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

STANDINS = ("flash_attn", "xformers", "apex")
"""Packages the runtime may stand in for: importing one before torch installs first (``torchdevice.standins``)."""
VARIABLE = "TORCHDEVICE_INSTALL"
"""Unset or ``0``: nothing happens (``0`` also keeps an installation from propagating); else how to install."""


class TorchImport:
    """A ``sys.meta_path`` finder that installs torchdevice right after torch's own ``__init__`` has run.

    It stays in place until torch is really imported: ``importlib.util.find_spec("torch")``, which
    libraries call to ask whether torch is present, finds a spec without importing it.
    """

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname in STANDINS:  # `from flash_attn import ...` before `import torch`: install, then look again
            import importlib.util

            import torch  # noqa: F401  (installs, which removes this finder)
            return importlib.util.find_spec(fullname)
        if fullname != "torch":
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if finder is not self and find is not None else None
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_torch = loader.exec_module  # type: ignore[union-attr]

        def exec_module(module: ModuleType) -> None:
            exec_torch(module)
            vars(loader).pop("exec_module", None)  # the loader is torch's again
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _install()

        loader.exec_module = exec_module  # type: ignore[union-attr]
        return spec


def activate() -> None:
    """Install torchdevice in this process when it imports torch, unless ``TORCHDEVICE_INSTALL`` is unset or
    ``0``. Idempotent (site-packages may be processed twice at start-up)."""
    if os.environ.get(VARIABLE, "0") == "0" or any(isinstance(finder, TorchImport) for finder in sys.meta_path):
        return
    if "torch" in sys.modules:  # imported by an earlier start-up hook
        _install()
    else:
        sys.meta_path.insert(0, TorchImport())


PENDING: list[bool] = []
"""Whether torch was imported by torchdevice's runtime module itself while it loaded (``import torchdevice;
torchdevice.install()`` in a process that inherited an installation): the module installs once it is loaded."""


def _install() -> None:
    loading = sys.modules.get("torchdevice.runtime.activation")
    if loading is not None and not hasattr(loading, "install_inherited"):
        PENDING.append(True)
        return
    from torchdevice.runtime import activation

    activation.install_inherited()
