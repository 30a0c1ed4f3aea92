"""Rewrite many files (Python files and notebooks, whose code cells are rewritten as one module: see
:mod:`torchdevice.source.notebooks`): read, test cheaply, parse and rewrite in the worker pool
(``torchdevice.source.pool``); write in this process.

The parent process is the only one that writes, each file right after its result arrives and only if
the file is still what the worker read. Each file gets a size limit (set aside unread above it) and a
time limit (given up past it), so one generated file cannot stall a run.
"""

from __future__ import annotations

import contextlib
import difflib
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from torchdevice.rewrite import ruleset
from torchdevice.rewrite.selection import Selection
from torchdevice.rewrite.source import RewriteError, SourceError, rewrite_source
from torchdevice.rewrite.state import Note
from torchdevice.source import files, notebooks
from torchdevice.source.parsing import split_lines
from torchdevice.source.pool import parallel

Mode = Literal["check", "diff", "write"]
Status = Literal["clean", "unchanged", "changed", "skipped", "failed"]


@dataclass(frozen=True)
class Options:
    mode: Mode = "check"
    selection: Selection = Selection()
    max_bytes: int | None = 1_000_000
    """Files larger than this are set aside unread."""
    seconds: float | None = 60.0
    """A file still being rewritten after this long is given up."""


@dataclass(frozen=True)
class FileResult:
    path: str
    status: Status
    """``clean``: nothing CUDA-specific in the text; ``skipped``/``failed``: see ``reason``."""
    notes: tuple[Note, ...] = ()
    sites: dict[str, int] = field(default_factory=dict)
    """Rule code -> sites rewritten."""
    added: int = 0
    """Lines the rewrite adds."""
    reason: str = ""
    cells: tuple[tuple[int, str], ...] = ()
    """In a notebook: (number, why) of the code cells set aside (IPython cell magics, cells that do not parse)."""
    diff: str = ""
    changes: tuple[Change, ...] = ()
    """``changed``: where, in the original, and what it becomes."""
    snapshot: files.Snapshot | None = None
    data: bytes = b""
    """``write``: the new content, for the parent to write."""


@dataclass(frozen=True)
class Change:
    """One place a rewrite changes: ``lines`` original lines from ``line`` (1-based) replaced by ``text`` (``lines``
    0: ``text`` inserted before ``line``, or after it where ``after``: at the end); in a notebook, in code cell
    ``cell``."""

    line: int
    lines: int
    text: str
    cell: int | None = None
    after: bool = False

    @property
    def end(self) -> int:
        """The last original line it replaces (``line`` for an insertion)."""
        return self.line + max(self.lines, 1) - 1


class TimeLimit(Exception):
    """The per-file time limit was reached."""


def rewrite_files(
    found: Sequence[files.Found], options: Options, jobs: int, progress: Callable[[int, int], None] | None = None,
) -> list[FileResult]:
    """Results in the order of ``found``; ``progress(done, total)`` is called as files are done."""
    results: list[FileResult | None] = [None] * len(found)
    work: list[tuple[int, str]] = []
    for i, item in enumerate(found):
        if item.skip:
            results[i] = FileResult(str(item.path), "skipped", reason=item.skip)
        else:
            work.append((i, str(item.path)))
    with parallel(_rewrite_one, [(path, options) for _, path in work], jobs) as done:
        for n, ((i, _), result) in enumerate(zip(work, done, strict=True), 1):
            results[i] = _write(result) if options.mode == "write" and result.status == "changed" else result
            if progress is not None:
                progress(n, len(work))
    return [r for r in results if r is not None]  # every slot is filled


def _rewrite_one(task: tuple[str, Options]) -> FileResult:
    path, options = task
    try:
        return rewrite_file(Path(path), options)
    except Exception as exc:  # one bad file must not stop the others
        return FileResult(path, "failed", reason=f"{path}: internal error: {type(exc).__name__}: {exc}")


def rewrite_file(path: Path, options: Options) -> FileResult:
    """Read and rewrite one file; in ``write`` mode the result carries the new content (see ``_write``)."""
    name = str(path)
    try:
        notebook = None
        if notebooks.is_notebook(path):
            notebook, snapshot = notebooks.load(path, options.max_bytes)
            data = notebook.script.encode()
        else:
            data, snapshot = files.read(path, options.max_bytes)
    except files.Skipped as exc:
        return FileResult(name, "skipped", reason=str(exc))
    except files.Unreadable as exc:
        return FileResult(name, "failed", reason=str(exc))
    skipped = notebook.cells.skipped if notebook is not None else ()
    if not ruleset.default().may_apply(data):
        return FileResult(name, "clean", cells=skipped)
    try:
        source, encoding = files.decode(path, data) if notebook is None else (notebook.script, "utf-8")
        with _time_limit(options.seconds):
            result = rewrite_source(source, ruleset.default(), options.selection)
    except files.Unreadable as exc:
        return FileResult(name, "failed", reason=str(exc))
    except SourceError as exc:
        where = notebooks.place(name, *notebook.cells.locate(exc.line)) if notebook else f"{path}:{exc.line}"
        return FileResult(name, "failed", reason=f"{where}: syntax error: {exc}")
    except RewriteError as exc:
        return FileResult(name, "failed", reason=f"{path}: {exc}")
    except TimeLimit:
        return FileResult(name, "skipped", reason=f"still rewriting after {options.seconds:g} s (--timeout)")
    notes = result.notes
    if notebook is not None:
        notes = tuple(replace(n, cell=cell, line=line) for n in notes for cell, line in [notebook.cells.locate(n.line)])
    if result.code == source:
        return FileResult(name, "unchanged", notes, cells=skipped)
    try:
        rewritten = notebook.rewritten(result.code) if notebook is not None else []
    except ValueError as exc:
        return FileResult(name, "failed", notes, reason=f"{path}: internal error: {exc}; left unchanged")
    changes = [(name, split_lines(source), split_lines(result.code))] if notebook is None else \
        [(f"{name}:cell {n}", _lines(old), _lines(new)) for n, old, new in rewritten]
    added = sum(len(after) - len(before) for _, before, after in changes)
    numbers: list[int | None] = [None] if notebook is None else [n for n, _, _ in rewritten]
    places = tuple(c for cell, (_, before, after) in zip(numbers, changes, strict=True)
                   for c in _changes(before, after, cell))
    diff = "".join("".join(difflib.unified_diff(before, after, fromfile=where, tofile=where))
                   for where, before, after in changes) if options.mode == "diff" else ""
    try:
        if options.mode != "write":
            new = b""
        else:
            new = files.encode(path, result.code, encoding) if notebook is None else notebook.dumps(rewritten)
    except files.Refused as exc:
        return FileResult(name, "failed", notes, reason=f"{path}: not written: {exc}")
    return FileResult(name, "changed", notes, result.sites, added, cells=skipped, diff=diff, changes=places,
                      snapshot=snapshot, data=new)


def _changes(before: list[str], after: list[str], cell: int | None) -> Iterator[Change]:
    """The changed places between two versions of a text's lines."""
    matcher = difflib.SequenceMatcher(None, before, after)  # as unified_diff matches them
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            end = i1 == len(before) and i1 > 0
            yield Change(i1 if end else i1 + 1, i2 - i1, "".join(after[j1:j2]), cell, after=end)


def _lines(cell: str) -> list[str]:
    """A cell's lines for a diff, the last one ended too (a cell's source has no final newline)."""
    lines = split_lines(cell)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    return lines


def _write(result: FileResult) -> FileResult:
    """Write a changed file's new content (in the parent process)."""
    assert result.snapshot is not None
    try:
        files.replace(Path(result.path), result.snapshot, result.data)
    except files.Refused as exc:
        return replace(result, status="failed", reason=f"{result.path}: not written: {exc}", data=b"")
    except OSError as exc:
        return replace(result, status="failed", reason=f"{result.path}: cannot write: {exc.strerror or exc}", data=b"")
    return replace(result, data=b"")


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise TimeLimit in the block after ``seconds`` (where the platform has interval timers)."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum, frame):
        raise TimeLimit

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

