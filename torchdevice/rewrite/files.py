"""Finding the Python files under the given paths, decoding them, and writing them back atomically."""

from __future__ import annotations

import codecs
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from fnmatch import fnmatch
from pathlib import Path

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "site-packages", ".venv", "venv", ".tox", ".nox"})
"""Directories never walked into; so are virtual environments (directories holding ``pyvenv.cfg``)."""


class Unreadable(Exception):
    """A file that cannot be read or decoded; ``str()`` is ``path[:line]: reason``."""


def discover(paths: Iterable[str], exclude: Iterable[str] = ()) -> Iterator[Path]:
    """Files named in ``paths`` and ``*.py`` files below the directories among them, each once, in order.

    ``exclude`` globs are matched against a file's or directory's name and its path relative to the
    directory given; they apply to what is found by walking, not to files named explicitly.
    A path that does not exist is yielded as is, so reading it reports the error.
    """
    globs = tuple(exclude)
    seen: set[Path] = set()
    for given in paths:
        root = Path(given)
        found = _walk(root, globs) if root.is_dir() else iter([root])
        for path in found:
            key = path.resolve()
            if key not in seen:
                seen.add(key)
                yield path


def _walk(root: Path, globs: tuple[str, ...]) -> Iterator[Path]:
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        dirs[:] = sorted(
            d for d in dirs
            if d not in SKIPPED_DIRS and not (here / d / "pyvenv.cfg").exists()
            and not _excluded(here / d, root, globs)
        )
        for name in sorted(files):
            path = here / name
            if name.endswith(".py") and not _excluded(path, root, globs):
                yield path


def _excluded(path: Path, root: Path, globs: tuple[str, ...]) -> bool:
    relative = path.relative_to(root).as_posix()
    return any(fnmatch(path.name, g) or fnmatch(relative, g) for g in globs)


def read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise Unreadable(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise Unreadable(f"{path}: cannot read: {exc.strerror or exc}") from None


def decode(path: Path, data: bytes) -> str:
    """The text of a UTF-8 file (a byte-order mark is dropped; ``encode`` puts it back)."""
    try:
        return data.removeprefix(codecs.BOM_UTF8).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise Unreadable(f"{path}:{line}: not UTF-8 (byte {data[exc.start]:#04x}); skipped") from None


def encode(text: str, like: bytes) -> bytes:
    """``text`` as UTF-8, with a byte-order mark if the original ``like`` had one."""
    return (codecs.BOM_UTF8 if like.startswith(codecs.BOM_UTF8) else b"") + text.encode("utf-8")


def write_atomic(path: Path, data: bytes) -> None:
    """Replace the file's content at once (a temporary file renamed over it), keeping its mode."""
    target = path.resolve()
    mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
