"""The torch releases torchdevice runs on, and whose facts it uses on the installed one.

The catalog is scanned from one release (``torchdevice_generated.TORCH_VERSION``); each other known release's own
files are kept as what differs from it (``catalog/releases/``), and each generated table holds the catalog's
release's values, changed at import into the installed release's by :func:`apply`. On a release newer than the
newest known, the newest known's facts are used, and :func:`facts` says so. The runtime runs on every release in
:data:`TESTED` (``make test-torch TORCH=2.x`` runs the tier that shows it), judging each torch internal it calls by
whether the installed torch has it, not by the release's number.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from torchdevice.records.releases import changed

TESTED = ((2, 10), (2, 11), (2, 12), (2, 13), (2, 14), (2, 15))
"""The releases (major, minor) the release tier ran on (the README's table)."""


def release(version: str | None = None) -> tuple[int, int]:
    """``"2.13.0+cpu"`` (default: the installed torch's) -> ``(2, 13)``."""
    major, minor = (version or torch.__version__).split("+")[0].split(".")[:2]
    return int(major), int(minor)


def _name(numbers: tuple[int, int]) -> str:
    return ".".join(map(str, numbers))


def known() -> dict[tuple[int, int], str]:
    """The releases whose own facts the generated tables hold, by (major, minor): the scanned version."""
    from torchdevice_generated.releases import KNOWN

    return {release(v): v for v in KNOWN}


def facts_of(version: str | None = None) -> str:
    """The known release (its scanned version) whose facts are used on ``version`` (default: the installed torch):
    its own; on a newer one, the newest known's; on an older one, the oldest's."""
    table, here = known(), release(version)
    if here in table:
        return table[here]
    return table[max(table)] if here > max(table) else table[min(table)]


def facts() -> str:
    """One line: the installed release, and whose facts the runtime uses on it."""
    here, used = release(), facts_of()
    newest = max(known())
    if release(used) == here:
        return (f"torch {torch.__version__}: the facts (entry points, kernel tables, MPS's messages, CUDA's alerts) "
                f"are torch {used}'s own")
    if here > newest:
        return (f"torch {torch.__version__} is newer than the newest known release ({_name(newest)}): the facts "
                f"(entry points, kernel tables, MPS's messages, CUDA's alerts) are torch {used}'s; what this release "
                "changed is not known to torchdevice")
    return (f"torch {torch.__version__} is older than the oldest supported release ({_name(TESTED[0])}): the facts "
            f"are torch {used}'s")


def supported() -> bool:
    """Whether the installed release is one torchdevice supports (2.10 or newer)."""
    return release() >= TESTED[0]


def resolve(asked: str) -> str:
    """The known release ``asked`` names (``2.11``, ``2.11.0``), as scanned; ValueError naming the known ones."""
    table = known()
    try:
        return table[release(asked)]
    except (ValueError, KeyError):
        raise ValueError(f"torch {asked}: not a known release (known: {', '.join(table.values())})") from None


def apply(namespace: dict[str, Any]) -> None:
    """At the end of each generated table module: its constants as the installed release's own files have them
    (the catalog's values of those it changes kept in ``_CATALOG_VALUES``, for :func:`value`). Only the package's
    own modules are changed (``codegen`` runs their text under another name to compare)."""
    module = namespace.get("__name__", "")
    if not module.startswith("torchdevice_generated."):
        return
    from torchdevice_generated.releases import CHANGES

    prefix = module.rpartition(".")[2] + "."
    kept = namespace.setdefault("_CATALOG_VALUES", {})
    for key, change in CHANGES.get(facts_of(), {}).items():
        if key.startswith(prefix):
            name = key[len(prefix):]
            kept[name] = namespace[name]
            namespace[name] = changed(namespace[name], change)


def value(module: ModuleType, name: str, version: str) -> Any:
    """A generated table's constant as known release ``version``'s own files have it (any release, not only the
    installed one)."""
    from torchdevice_generated.releases import CHANGES

    base = module._CATALOG_VALUES.get(name, getattr(module, name))
    change = CHANGES.get(version, {}).get(f"{module.__name__.rpartition('.')[2]}.{name}")
    return changed(base, change) if change else base
