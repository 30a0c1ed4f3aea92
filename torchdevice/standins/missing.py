"""What a stand-in does not cover fails where it is imported, with an :class:`ImportError` naming it and the
torch equivalent to use, so code that guards the import (``try: from apex... except ImportError:``) treats
the package as absent. Messages come from the generated table (``catalog/overlays/standins.yaml``)."""

from __future__ import annotations

import dis
import sys
from collections.abc import Callable
from types import FrameType
from typing import NoReturn

_IMPORT_FROM = dis.opmap["IMPORT_FROM"]


def explain(name: str) -> str:
    """Why ``name`` (``apex.optimizers.FusedLAMB``) is not there, and what to use instead."""
    from torchdevice_generated.standins import MISSING, PACKAGES

    top = name.partition(".")[0]
    distribution, default = PACKAGES[top]
    parts = name.split(".")
    instead = next((MISSING[".".join(parts[:n])] for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in MISSING),
                   default)
    return (f"{name} is not covered by torchdevice's stand-in for {distribution} (the real package is not "
            f"installed); use {instead}")


def module_getattr(module: str) -> Callable[[str], NoReturn]:
    """A module ``__getattr__`` for a stand-in module: an uncovered name raises :class:`ImportError` in an
    import statement (``from apex.amp import x``) and :class:`AttributeError` elsewhere (``hasattr``,
    ``getattr(m, x, None)``, ``apex.x``), both with :func:`explain`'s message."""

    def __getattr__(name: str) -> NoReturn:
        if name.startswith("__"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        message = explain(f"{module}.{name}")
        if _importing(sys._getframe(1)):
            raise ImportError(message, name=module)
        raise AttributeError(message)

    return __getattr__


def _importing(frame: FrameType | None) -> bool:
    """Whether the caller is the ``IMPORT_FROM`` instruction of ``from m import x`` (the import system's own
    ``hasattr`` on a package, before it tries ``x`` as a submodule, gets an AttributeError)."""
    if frame is None:
        return False
    code = frame.f_code
    return 0 <= frame.f_lasti < len(code.co_code) and code.co_code[frame.f_lasti] == _IMPORT_FROM
