"""Names bound before ``install()``: ``from torch import zeros`` copies the function into the importing module.

Installing replaces attributes of torch's modules. A module that bound one of them by name earlier
(``from torch import zeros``, ``from torch.cuda import is_available``) keeps the original, which does
not redirect ``"cuda"``: ``zeros(3, device="cuda")`` then fails as it would without torchdevice.
:func:`stale_bindings` finds such names in every loaded module but torch's and torchdevice's own,
so that ``install()`` can name them in a warning. ``torchdevice run`` and the start-up hook of child
processes install before the program imports torch, so this arises only where a program calls
``install()`` itself after such imports.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

OWN = ("torch", "torchdevice", "torchdevice_generated")
"""Top-level packages whose modules are not searched: the runtime accounts for them."""


def stale_bindings(replaced: Iterable[tuple[Any, str, Any]]) -> dict[str, list[str]]:
    """``{module: ["name (torch.original)", ...]}``: globals of loaded modules that are functions or classes
    which a patch of a module attribute replaced (``replaced``: ``(owner, name, original)`` triples)."""
    originals = {id(original): (original, f"{owner.__name__}.{name}") for owner, name, original in replaced
                 if isinstance(owner, ModuleType) and callable(original)}
    found: dict[str, list[str]] = {}
    if not originals:  # passing through to CUDA: nothing was replaced
        return found
    for module_name, module in list(sys.modules.items()):
        namespace = getattr(module, "__dict__", None)
        if module_name.partition(".")[0] in OWN or not isinstance(namespace, dict):
            continue
        names = [f"{name} ({originals[id(value)][1]})" for name, value in list(namespace.items())
                 if id(value) in originals and originals[id(value)][0] is value]
        if names:
            found[module_name] = names
    return found


def message(found: dict[str, list[str]]) -> str:
    """The warning for what :func:`stale_bindings` found."""
    listed = "; ".join(f"{module}: {', '.join(names)}" for module, names in found.items())
    return ("torchdevice was installed after these modules imported torch functions by name, and those names "
            f"still call the originals, which do not redirect \"cuda\": {listed}. Install first (call "
            "torchdevice.install() before those imports, or run the program with `torchdevice run`), or call "
            "them through their module (torch.zeros rather than a bound zeros)")
