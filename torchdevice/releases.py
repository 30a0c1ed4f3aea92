"""The torch releases torchdevice runs on, and whose facts it uses on the installed one.

The catalog is scanned from one release (``torchdevice_generated.TORCH_VERSION``); each other known release's own
files are kept as what differs from it (``catalog/releases/``), and each generated table holds the catalog's
release's values, changed at import into the installed release's by :func:`apply`. On a release newer than the
newest known, its own files (entry points, kernels, autocast lists) are scanned at first use by the toolchain the
package carries (:mod:`codegen.unknown`, in a process of its own) into ``releases/`` of the user cache directory,
once per torch and torchdevice, said on a terminal and at INFO with the time it took; what only torch's other wheels
hold (MPS's messages, CUDA's alerts) is the newest known's. Where that scan cannot be had (no cache directory, a scan
that failed: remembered there and not tried again), the newest known's facts are used; :func:`facts` says which. The
runtime runs on every release in :data:`TESTED` (``make test-torch TORCH=2.x`` runs the tier that shows it), judging
each torch internal it calls by whether the installed torch has it, not by the release's number.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from torchdevice.cachedir import cache_dir
from torchdevice.records.releases import changed

log = logging.getLogger("torchdevice")

SCAN_TIMEOUT = 600
"""Seconds the first-use scan of an unknown release may take (it takes about 10)."""
FAILED = ".failed.txt"
"""Beside where a scan would be: why it failed, so that no later process of the same torch and torchdevice tries
again."""

_scan: dict[str, Any] = {}

TESTED = ((2, 10), (2, 11), (2, 12), (2, 13), (2, 14), (2, 15))
"""The releases (major, minor) the release tier ran on (the table of docs/releases.md)."""


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
    """The release whose facts are used on ``version`` (default: the installed torch): a known one's own; on the
    installed torch newer than the newest known, its own as scanned at first use (:func:`scanned`), else the newest
    known's; on an older one, the oldest's."""
    table, here = known(), release(version)
    if here in table:
        return table[here]
    if here < min(table):
        return table[min(table)]
    if version is None and scanned():
        return str(scanned()["VERSION"])
    return table[max(table)]


def facts() -> str:
    """One line: the installed release, and whose facts the runtime uses on it."""
    here, newest = release(), max(known())
    if here in known():
        return (f"torch {torch.__version__}: the facts (entry points, kernel tables, MPS's messages, CUDA's alerts) "
                f"are torch {known()[here]}'s own")
    if here < min(known()):
        return (f"torch {torch.__version__} is older than the oldest supported release ({_name(TESTED[0])}): the "
                f"facts are torch {facts_of()}'s")
    newer = f"torch {torch.__version__} is newer than the newest known release ({_name(newest)})"
    if scanned():
        return (f"{newer}: its entry points, kernel tables and autocast lists are its own (scanned at first use "
                f"into {_scan['path']}); MPS's messages and CUDA's alerts are torch {scanned()['MESSAGES_OF']}'s")
    return (f"{newer}: the facts (entry points, kernel tables, MPS's messages, CUDA's alerts) are torch "
            f"{known()[newest]}'s; its own could not be scanned: {_scan['why']}")


def scanned() -> dict[str, Any]:
    """The installed torch's own changes, scanned at first use (``VERSION``, ``MESSAGES_OF``, ``CHANGES``,
    ``DIFFERS``, ``ROWS``: :mod:`codegen.unknown`); empty on a known release, or where the scan cannot be had (why:
    in :func:`facts`). Once per process."""
    if "changes" not in _scan:
        _scan["changes"] = {}
        if release() > max(known()):
            _scan["changes"], _scan["why"] = _scanned()
    return _scan["changes"]  # type: ignore[no-any-return]


def _scanned() -> tuple[dict[str, Any], str]:
    """The scan's module's namespace, scanning first where needed; why not, where it cannot be had."""
    toolchain = _toolchain()
    if toolchain is None:
        return {}, "the package carries no toolchain to scan it with"
    cache = cache_dir()
    if cache is None:
        return {}, "no user cache directory to keep its scan in"
    path = cache / "releases" / f"torch-{torch.__version__}-{_key()}.py"
    failed = path.with_name(path.name + FAILED)
    _scan["path"] = path
    try:
        if not path.exists() and not failed.exists():
            from filelock import FileLock

            path.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(path) + ".lock"):  # processes started together scan once
                if not path.exists() and not failed.exists():
                    _run_scan(toolchain, path, failed)
        if failed.exists():  # scanned once and failed: not tried again for this torch and torchdevice
            return {}, failed.read_text(encoding="utf-8").strip()
        namespace: dict[str, Any] = {"__name__": "torchdevice.releases:scanned"}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)  # noqa: S102 - written by us
    except (OSError, SyntaxError, ImportError) as exc:
        return {}, f"its scan could not be kept in or read from {path.parent}: {type(exc).__name__}: {exc}"
    return namespace, ""


def _run_scan(toolchain: Path, path: Path, failed: Path) -> None:
    """Scan the installed torch into ``path`` (:mod:`codegen.unknown`, in a process of its own, without the
    runtime); why not, in ``failed``."""
    from torchdevice.logs import say

    say(f"torch {torch.__version__} is newer than the newest known release ({_name(max(known()))}): scanning its "
        f"own files into {path.parent} (once per torch and torchdevice; about 10 s)")
    start = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(toolchain), *filter(None, sys.path)])
    try:
        done = subprocess.run([sys.executable, "-m", "codegen.unknown", str(path)], cwd=toolchain, env=env,
                              capture_output=True, text=True, timeout=SCAN_TIMEOUT, check=False)
        said = (done.stderr or done.stdout).strip().splitlines() or [f"exit status {done.returncode}"]
        why = "" if done.returncode == 0 else f"its scan failed: {said[-1].removeprefix('error: ')}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"its scan failed: {type(exc).__name__}: {exc}"
    if why:
        failed.write_text(why + "\n", encoding="utf-8")
        say(f"torch {torch.__version__}: {why} (said in {failed}); the newest known release's facts are used")
    else:
        say(f"scanned torch {torch.__version__}'s own files in {time.monotonic() - start:.1f} s")


def _toolchain() -> Path | None:
    """Where ``codegen/`` and ``catalog/`` are: the wheel's ``torchdevice/_toolchain``, else a source checkout."""
    here = Path(__file__).resolve().parent
    for root in (here / "_toolchain", here.parent):
        if (root / "codegen" / "unknown.py").is_file() and (root / "catalog" / "scanned").is_dir():
            return root
    return None


def _key() -> str:
    """What a scan depends on: the installed torch and the generated package (its files' sizes and times)."""
    import torchdevice_generated

    package = Path(torchdevice_generated.__file__).parent
    stats = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in package.iterdir() if p.is_file())
    return hashlib.sha256(repr((torch.__version__, torch.__file__, stats)).encode()).hexdigest()[:16]


def changes(version: str) -> dict[str, tuple[object, ...]]:
    """``module.CONSTANT`` -> the change of the catalog's value into release ``version``'s (a known one, or the
    installed torch's as scanned)."""
    from torchdevice_generated.releases import CHANGES

    if version in CHANGES:
        return CHANGES[version]
    return scanned().get("CHANGES", {}) if scanned().get("VERSION") == version else {}


def supported() -> bool:
    """Whether the installed release is one torchdevice supports (2.10 or newer)."""
    return release() >= TESTED[0]


def resolve(asked: str) -> str:
    """The known release ``asked`` names (``2.11``, ``2.11.0``), as scanned (or the installed one, scanned at its
    first use); ValueError naming the known ones."""
    table = known()
    if scanned() and release(asked) == release():
        return str(scanned()["VERSION"])
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
    prefix = module.rpartition(".")[2] + "."
    kept = namespace.setdefault("_CATALOG_VALUES", {})
    for key, change in changes(facts_of()).items():
        if key.startswith(prefix):
            name = key[len(prefix):]
            kept[name] = namespace[name]
            namespace[name] = changed(namespace[name], change)


def value(module: ModuleType, name: str, version: str) -> Any:
    """A generated table's constant as release ``version``'s own files have it (any known release, not only the
    installed one, or the installed one as scanned)."""
    base = module._CATALOG_VALUES.get(name, getattr(module, name))
    change = changes(version).get(f"{module.__name__.rpartition('.')[2]}.{name}")
    return changed(base, change) if change else base
