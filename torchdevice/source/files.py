"""Finding the Python files and Jupyter notebooks under the given paths, reading and decoding them, and replacing them
safely.

Walking never follows a symbolic link out of the given paths, never enters a directory through a link
(so link loops end nothing), and sets aside what is not a regular file (a FIFO named ``x.py`` would
block a reader). A file is decoded as Python decodes it (a byte-order mark or a PEP 263 ``coding``
declaration, else UTF-8) and written back the same way. A replacement is written next to the file,
given its mode and owner, flushed, and renamed over it only if the file is still what was read.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import io
import os
import stat
import tempfile
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "site-packages", ".venv", "venv", ".tox", ".nox",
                          ".ipynb_checkpoints"})
"""Directories never walked into (Jupyter's checkpoints are copies of notebooks); so are virtual environments
(directories holding ``pyvenv.cfg``)."""
SUFFIXES = (".py", ".ipynb")
"""What walking a directory finds: Python files and notebooks (:mod:`torchdevice.source.notebooks`)."""


class Unreadable(Exception):
    """A file that cannot be read or decoded; ``str()`` is ``path[:line]: reason``."""


class Skipped(Exception):
    """A file set aside on purpose (not a regular file, too large...); ``str()`` is the reason."""


class Refused(Exception):
    """A replacement not written because it would lose something; ``str()`` is the reason."""


@dataclass(frozen=True)
class Found:
    """A file to read, or (``skip`` set) one found and set aside, with why."""

    path: Path
    skip: str = ""


@dataclass(frozen=True)
class Snapshot:
    """What a file was when it was read: the same file, size, time and content mean unchanged."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    digest: bytes

    @classmethod
    def of(cls, st: os.stat_result, data: bytes) -> Snapshot:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, hashlib.sha256(data).digest())

    def same_file(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (self.device, self.inode, self.size, self.mtime_ns)


def discover(paths: Iterable[str], exclude: Iterable[str] = ()) -> Iterator[Found]:
    """Files named in ``paths`` and ``*.py`` and ``*.ipynb`` files below the directories among them, each once, in
    order.

    ``exclude`` globs are matched against a file's or directory's name and its path relative to the
    directory given; they apply to what is found by walking, not to files named explicitly. A path
    that does not exist is yielded as is, so reading it reports the error.
    """
    globs = tuple(exclude)
    seen: set[str] = set()
    for given in paths:
        root = Path(given)
        found = _walk(root, os.path.realpath(root), globs) if root.is_dir() else iter([Found(root)])
        for item in found:
            key = os.path.realpath(item.path)
            if key not in seen:
                seen.add(key)
                yield item


def _walk(root: Path, inside: str, globs: tuple[str, ...]) -> Iterator[Found]:
    """Depth first, files before subdirectories, both sorted by name; links are resolved, not walked."""
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            yield Found(directory, f"cannot list the directory: {exc.strerror or exc}")
            continue
        subdirectories = []
        for entry in entries:
            path = Path(entry.path)
            if _excluded(path, root, globs):
                continue
            if entry.is_symlink():
                found = _link(path, inside)
                if found is not None and (found.skip or entry.name.endswith(SUFFIXES)):
                    yield found
            elif entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_DIRS and not (path / "pyvenv.cfg").exists():
                    subdirectories.append(path)
            elif entry.name.endswith(SUFFIXES):
                yield Found(path) if entry.is_file(follow_symlinks=False) else Found(path, "not a regular file")
        stack.extend(reversed(subdirectories))


def _link(path: Path, inside: str) -> Found | None:
    """A symbolic link met while walking: a file inside the given paths is rewritten where it is; a link out
    of them, or in a loop, is set aside; a directory link is not walked (its target is, if inside)."""
    target = os.path.realpath(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return Found(path, "symbolic link loop")
        return Found(path) if path.name.endswith(SUFFIXES) else None  # dangling: reading it says so
    if os.path.commonpath([target, inside]) != inside:
        kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
        return Found(path, f"symbolic link to a {kind} outside the given paths ({target}); not followed")
    return None if stat.S_ISDIR(st.st_mode) else Found(path)


def _excluded(path: Path, root: Path, globs: tuple[str, ...]) -> bool:
    relative = path.relative_to(root).as_posix()
    return any(fnmatch(path.name, g) or fnmatch(relative, g) for g in globs)


def read(path: Path, max_bytes: int | None = None) -> tuple[bytes, Snapshot]:
    """The bytes of a regular file and its snapshot; raises Unreadable, or Skipped for what is set aside."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise Unreadable(f"{path}: no such file or directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Skipped("symbolic link loop") from None
        raise Unreadable(f"{path}: cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Skipped("not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise Skipped(f"{st.st_size:,} bytes, over the limit of {max_bytes:,} (--max-file-size)")
        try:
            data = f.read()
        except OSError as exc:
            raise Unreadable(f"{path}: cannot read: {exc.strerror or exc}") from None
    return data, Snapshot.of(st, data)


def encoding(path: Path, data: bytes) -> str:
    """The encoding Python reads the file with (byte-order mark, PEP 263 declaration, else UTF-8)."""
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:
        line = next((n for n, text in enumerate(data.split(b"\n", 2)[:2], 1) if b"coding" in text), 1)
        raise Unreadable(f"{path}:{line}: {exc}; skipped") from None


def decode(path: Path, data: bytes) -> tuple[str, str]:
    """The text of a file and its encoding (``utf-8-sig`` where it has a byte-order mark)."""
    name = encoding(path, data)
    try:
        return data.decode(name), name
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        shown = "UTF-8" if codecs.lookup(name).name in ("utf-8", "utf-8-sig") else name
        raise Unreadable(f"{path}:{line}: not {shown} (byte {data[exc.start]:#04x}); skipped") from None


def encode(path: Path, text: str, name: str) -> bytes:
    try:
        return text.encode(name)
    except UnicodeEncodeError as exc:
        raise Refused(f"the rewritten text cannot be written in its encoding {name}: {exc.reason}") from None


def replace(path: Path, snapshot: Snapshot, data: bytes) -> None:
    """Replace the file (through a link: its target) with ``data`` if it is still as ``snapshot`` says.

    Raises Refused, leaving the file as it is, when it changed since it was read, has other hard links
    (a rename would separate them), is read-only, or its owner cannot be kept.
    """
    target = os.path.realpath(path)
    try:
        with open(target, "rb", buffering=0, opener=lambda p, f: os.open(p, f | os.O_NONBLOCK)) as current:
            st = os.fstat(current.fileno())
            unchanged = stat.S_ISREG(st.st_mode) and snapshot.same_file(st) and \
                hashlib.sha256(current.read()).digest() == snapshot.digest
    except FileNotFoundError:
        raise Refused("it was removed since it was read") from None
    if not unchanged:
        raise Refused("it changed since it was read")
    if st.st_nlink > 1:
        raise Refused(f"it has {st.st_nlink} hard links, which replacing it would separate")
    if not st.st_mode & stat.S_IWUSR:
        raise Refused("it is read-only")
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=f".{os.path.basename(target)}.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
            mine = os.fstat(f.fileno())
            if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid):
                try:
                    os.fchown(f.fileno(), st.st_uid, st.st_gid)
                except PermissionError:
                    raise Refused(f"its owner ({st.st_uid}:{st.st_gid}) could not be kept") from None
        if not snapshot.same_file(os.stat(target)):
            raise Refused("it changed since it was read")
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
