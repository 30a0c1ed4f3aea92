"""Rewrite many files: read, test cheaply, parse and rewrite in the worker pool (``torchdevice.source.pool``);
write in this process.

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
from torchdevice.source import files
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
    diff: str = ""
    snapshot: files.Snapshot | None = None
    data: bytes = b""
    """``write``: the new content, for the parent to write."""


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
        data, snapshot = files.read(path, options.max_bytes)
    except files.Skipped as exc:
        return FileResult(name, "skipped", reason=str(exc))
    except files.Unreadable as exc:
        return FileResult(name, "failed", reason=str(exc))
    if not ruleset.default().may_apply(data):
        return FileResult(name, "clean")
    try:
        source, encoding = files.decode(path, data)
        with _time_limit(options.seconds):
            result = rewrite_source(source, ruleset.default(), options.selection)
    except files.Unreadable as exc:
        return FileResult(name, "failed", reason=str(exc))
    except SourceError as exc:
        return FileResult(name, "failed", reason=f"{path}:{exc.line}: syntax error: {exc}")
    except RewriteError as exc:
        return FileResult(name, "failed", reason=f"{path}: {exc}")
    except TimeLimit:
        return FileResult(name, "skipped", reason=f"still rewriting after {options.seconds:g} s (--timeout)")
    if result.code == source:
        return FileResult(name, "unchanged", result.notes)
    before, after = split_lines(source), split_lines(result.code)
    diff = "".join(difflib.unified_diff(before, after, fromfile=name, tofile=name)) if options.mode == "diff" else ""
    try:
        new = files.encode(path, result.code, encoding) if options.mode == "write" else b""
    except files.Refused as exc:
        return FileResult(name, "failed", result.notes, reason=f"{path}: not written: {exc}")
    return FileResult(name, "changed", result.notes, result.sites, len(after) - len(before), diff=diff,
                      snapshot=snapshot, data=new)


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

