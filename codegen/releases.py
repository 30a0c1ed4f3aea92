"""Each known release's tables, kept as what differs from the catalog's own release's.

For each release of ``catalog/releases/``, the whole chain runs on its view of the catalog (``load(release=...)``,
``plan``, every template). The constants of the table modules (those ending in ``torchdevice.releases.apply``) are
compared with the catalog's release's, and each that differs is kept as a change that
:func:`torchdevice.records.releases.changed` applies (checked here to give the release's own value back):
``torchdevice_generated/releases.py``. The catalog rows that differ go to ``catalog_releases.jsonl``, which
``torchdevice catalog --torch`` reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from codegen.load import load
from codegen.plan import plan
from codegen.scan.release import known
from torchdevice.records.releases import changed
from torchdevice.source.pool import worker as pool_worker

APPLIED = "_apply_release(globals())"
"""The line a table module ends with (``_release.j2``): the modules compared."""


@dataclass(frozen=True)
class Release:
    """One known release's changes: ``module.CONSTANT`` -> the change's Python text; catalog rows by name (their
    JSON, ``null`` for an entry the release lacks); how the overlays' records differ there
    (:attr:`codegen.model.Catalog.differs`)."""

    version: str
    changes: tuple[tuple[str, str], ...]
    rows: tuple[tuple[str, str], ...]
    differs: tuple[str, ...]
    imports: tuple[tuple[str, str], ...]
    """``(module, name)`` of the row classes the changes' text names."""


def releases(files: dict[str, str], render: Callable[[Any], dict[str, str]]) -> tuple[Release, ...]:
    """Every known release's changes from ``files`` (the catalog's release's rendering); ``render`` renders a plan.
    The releases are rendered side by side, one process each (as many at once as there are cores)."""
    versions = known()
    if len(versions) < 2:
        return tuple(changes_of(v, files, render) for v in versions)
    with ProcessPoolExecutor(min(len(versions), os.cpu_count() or 1), mp_context=get_context("spawn"),
                             initializer=pool_worker, initargs=(os.getpid(),)) as pool:
        return tuple(pool.map(changes_of, versions, [files] * len(versions), [render] * len(versions)))


def changes_of(version: str, files: dict[str, str], render: Callable[[Any], dict[str, str]],
             scanned: Path | None = None) -> Release:
    """One release's changes (see :func:`releases`); ``scanned``: its scanned files, where the catalog does not
    know it (:mod:`codegen.unknown`)."""
    catalog = load(release=version, scanned=scanned)
    theirs = render(plan(catalog))
    changes: list[tuple[str, str]] = []
    imports: set[tuple[str, str]] = set()
    for path in sorted(p for p, text in files.items() if p.endswith(".py") and APPLIED in text):
        module = path.rpartition("/")[2].removesuffix(".py")
        ours, other = _constants(files[path], path), _constants(theirs[path], path)
        for name in sorted(ours.keys() | other.keys()):
            if ours.get(name) != other.get(name):
                changes.append((f"{module}.{name}", literal(change(ours[name], other[name]), imports)))
    base_rows, rows = _rows(files), _rows(theirs)
    differ = sorted(n for n in base_rows.keys() | rows.keys() if base_rows.get(n) != rows.get(n))
    return Release(version, tuple(changes), tuple((n, rows.get(n, "null")) for n in differ), catalog.differs,
                   tuple(sorted(imports)))


def _rows(files: dict[str, str]) -> dict[str, str]:
    _, *lines = files["torchdevice_generated/catalog.jsonl"].splitlines()
    return {json.loads(line)["name"]: line for line in lines}


def _constants(text: str, path: str) -> dict[str, Any]:
    """A table module's constants (run under another name: :func:`torchdevice.releases.apply` leaves them be)."""
    namespace: dict[str, Any] = {"__name__": f"codegen.releases:{path}"}
    exec(compile(text, path, "exec"), namespace)  # noqa: S102 - the module just rendered from the catalog
    return {k: v for k, v in namespace.items() if k.isupper()}


def change(ours: Any, theirs: Any) -> tuple[Any, ...]:
    """The change that makes ``theirs`` of ``ours`` (the smallest of those :func:`changed` applies)."""
    if isinstance(ours, frozenset) and isinstance(theirs, frozenset):
        found: tuple[Any, ...] = ("set", theirs - ours, ours - theirs)
    elif isinstance(ours, dict) and isinstance(theirs, dict):
        found = ("dict", {k: v for k, v in theirs.items() if k not in ours or ours[k] != v},
                 tuple(k for k in ours if k not in theirs))
    elif isinstance(ours, tuple) and isinstance(theirs, tuple):
        removed = tuple(r for r in ours if r not in theirs)
        found = ("rows", removed, tuple((i, r) for i, r in enumerate(theirs) if r not in ours))
    else:
        found = ("value", theirs)
    return found if changed(ours, found) == theirs else ("value", theirs)


def literal(value: Any, imports: set[tuple[str, str]]) -> str:
    """``value`` as Python text that reads back equal, the same whatever the hash seed (sets sorted); the row classes
    it names are added to ``imports`` as ``(module, name)``."""
    def text(v: Any) -> str:
        return literal(v, imports)

    if isinstance(value, (set, frozenset)):
        return f"frozenset({{{', '.join(sorted(map(text, value)))}}})" if value else "frozenset()"
    if hasattr(value, "_fields"):  # a NamedTuple row
        imports.add((type(value).__module__, type(value).__name__))
        return f"{type(value).__name__}({', '.join(f'{f}={text(getattr(value, f))}' for f in value._fields)})"
    if isinstance(value, tuple):
        return f"({', '.join(map(text, value))}{',' if len(value) == 1 else ''})"
    if isinstance(value, list):
        return f"[{', '.join(map(text, value))}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{text(k)}: {text(v)}" for k, v in value.items()) + "}"
    return repr(value)
