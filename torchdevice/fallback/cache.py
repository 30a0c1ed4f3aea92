"""The capability cache: which ops fail on which target, for which dtypes.

A verdict says that ``op`` fails on a target for ``dtype`` (or for every dtype, :data:`ANY`, when
the target has no kernel at all), and why (:data:`~torchdevice.device.errors.Reason`). Lookups
are dictionary accesses in memory. Verdicts learned at run time are also persisted, so the next
process does not try the target again: one JSON file per (torch version, torchdevice version) in
``$TORCHDEVICE_CACHE_DIR``, else the user cache directory that ``platformdirs`` names
(``~/Library/Caches/torchdevice`` on macOS, ``$XDG_CACHE_HOME/torchdevice`` or
``~/.cache/torchdevice`` on Linux, ``%LOCALAPPDATA%/torchdevice/Cache`` on Windows); with no usable
home directory (``HOME`` empty, relative, or the root directory) the cache stays in memory. Verdicts
seeded from the generated kernel table are never written: the table has them.

Writers merge: under a ``filelock`` lock on a side file (never opened through a symbolic link),
each writer reads the file, adds its verdicts and atomically replaces it (``os.replace`` of a
complete temporary file), so concurrent processes neither corrupt the file nor lose each other's
verdicts. A file that cannot be used (not UTF-8, not JSON or nested
too deeply to parse, not in this format, or written for other versions) never stops a run: it is
ignored with one warning and rewritten. A cache directory that cannot be written leaves the cache
in memory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import filelock

from torchdevice import atomic
from torchdevice.cachedir import cache_dir  # noqa: F401  (this module's directory, re-exported)
from torchdevice.device.errors import Reason

log = logging.getLogger("torchdevice.fallback")

ANY = "*"
"""The dtype of a verdict that holds for every dtype (a missing kernel)."""
FORMAT = "torchdevice-capabilities/1"
REASONS = ("kernel", "dtype")


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """The versions a capability file is keyed by."""
    import torch

    from torchdevice.version import __version__

    return {"torch": torch.__version__, "torchdevice": __version__}


def cache_path(directory: Path | None = None) -> Path | None:
    """The capability file in ``directory`` (default: :func:`cache_dir`); None where there is no directory."""
    directory = directory or cache_dir()
    if directory is None:
        return None
    v = versions()
    return directory / f"capabilities-torch-{v['torch']}-torchdevice-{v['torchdevice']}.json"


class InvalidCacheFile(ValueError):
    """A capability file that is not ours: corrupt, another format, or other versions."""


class CapabilityCache:
    """Verdicts of one target (``target``: its cache name, e.g. ``"mps"``), persisted in ``path``."""

    def __init__(self, target: str, path: Path | None) -> None:
        self.target = target
        self.path = path
        self._failing: dict[str, dict[str, Reason]] = {}
        self._learned: dict[str, dict[str, Reason]] = {}
        self._warned = False
        if path is not None:
            self._load()

    @classmethod
    def open(cls, target: str) -> CapabilityCache:
        """The cache of ``target`` in the user cache directory (in memory only where there is none)."""
        return cls(target, cache_path())


    def fails(self, op: str, dtype: str) -> bool:
        """Whether ``op`` is known to fail on the target for ``dtype``."""
        known = self._failing.get(op)
        return known is not None and (ANY in known or dtype in known)


    def reason(self, op: str, dtype: str) -> Reason | None:
        """Why ``op`` fails on the target for ``dtype``, if it is known to."""
        known = self._failing.get(op, {})
        return known.get(ANY) or known.get(dtype)

    def seed(self, ops: Iterable[str]) -> None:
        """Mark ``ops`` failing for every dtype (the kernel table says the target lacks them)."""
        for op in ops:
            self._failing.setdefault(op, {})[ANY] = "kernel"

    def record(self, op: str, dtype: str, reason: Reason) -> None:
        """Learn that ``op`` fails for ``dtype`` (``ANY``: every dtype); persist it."""
        self._failing.setdefault(op, {})[dtype] = reason
        self._learned.setdefault(op, {})[dtype] = reason
        if self.path is not None:
            self._save()

    def learned(self) -> dict[str, dict[str, Reason]]:
        """Verdicts learned at run time (this process's and earlier ones'), ``{op: {dtype: reason}}``."""
        return {op: dict(v) for op, v in self._learned.items()}

    def ops(self) -> frozenset[str]:
        """Every op with a verdict."""
        return frozenset(self._failing)


    def _load(self) -> None:
        assert self.path is not None
        try:
            stored = _read(self.path)
        except InvalidCacheFile as exc:
            self._warn(exc)
            with contextlib.suppress(OSError), _locked(self.path):
                _write(self.path, {})
            return
        except OSError as exc:
            log.debug("capability cache %s unreadable (%s); keeping verdicts in memory", self.path, exc)
            return
        for op, dtypes in stored.get(self.target, {}).items():
            self._learned.setdefault(op, {}).update(dtypes)
            self._failing.setdefault(op, {}).update(dtypes)

    def _save(self) -> None:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with _locked(self.path):
                try:
                    stored = _read(self.path)
                except InvalidCacheFile as exc:
                    self._warn(exc)
                    stored = {}
                mine = stored.setdefault(self.target, {})
                for op, dtypes in self._learned.items():
                    mine.setdefault(op, {}).update(dtypes)
                _write(self.path, stored)
        except OSError as exc:
            log.debug("capability cache %s not written (%s); keeping verdicts in memory", self.path, exc)

    def _warn(self, exc: InvalidCacheFile) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"torchdevice: ignoring capability cache {self.path} ({exc}); rebuilding it",
                          RuntimeWarning, stacklevel=2)


def _read(path: Path) -> dict[str, dict[str, dict[str, Reason]]]:
    """The verdicts stored in ``path`` by target; ``{}`` when there is no file yet."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        doc = json.loads(data.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InvalidCacheFile(f"not JSON: {exc}") from None
    except RecursionError:
        raise InvalidCacheFile("not JSON: nested too deeply") from None
    expected = {"format": FORMAT, **versions()}
    if not isinstance(doc, dict) or any(doc.get(k) != v for k, v in expected.items()):
        header = {k: doc.get(k) for k in expected} if isinstance(doc, dict) else type(doc).__name__
        raise InvalidCacheFile(f"written for {header}, expected {expected}")
    targets = doc.get("targets")
    if not _valid_targets(targets):
        raise InvalidCacheFile("malformed 'targets'")
    return cast(dict[str, dict[str, dict[str, Reason]]], targets)


def _valid_targets(targets: Any) -> bool:
    return isinstance(targets, dict) and all(
        isinstance(ops, dict) and all(
            isinstance(dtypes, dict) and all(isinstance(d, str) and r in REASONS for d, r in dtypes.items())
            for dtypes in ops.values()
        )
        for ops in targets.values()
    )


def _write(path: Path, targets: dict[str, Any]) -> None:
    atomic.write(path, json.dumps({"format": FORMAT, **versions(), "targets": targets}, indent=1, sort_keys=True))


def _locked(path: Path) -> filelock.FileLock:
    """An exclusive lock for read-merge-write of ``path``; a symbolic link planted in the lock file's
    place fails it (``OSError``) instead of creating or locking the file it points to. (``filelock`` is
    imported here, when a verdict is first written: importing it takes longer than installing the runtime.)"""
    import filelock

    return filelock.FileLock(path.with_name(path.name + ".lock"), mode=0o600)
