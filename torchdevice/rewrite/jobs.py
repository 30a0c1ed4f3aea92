"""Rewrite many files: a cheap text test first, then parsing in a pool of processes."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from torchdevice.rewrite import files, rules
from torchdevice.rewrite.outline import split_lines
from torchdevice.rewrite.source import Note, RewriteError, SourceError, rewrite_source

Mode = Literal["check", "diff", "write"]
Status = Literal["skipped", "unchanged", "changed", "failed"]


@dataclass(frozen=True)
class FileResult:
    path: str
    status: Status
    """``skipped``: nothing CUDA-specific in the text; ``failed``: see ``error``."""
    notes: tuple[Note, ...] = ()
    error: str = ""
    diff: str = ""


def rewrite_files(
    paths: Sequence[Path], mode: Mode, jobs: int, progress: Callable[[int, int], None] | None = None
) -> list[FileResult]:
    """Results in the order of ``paths``; ``progress(done, total)`` is called as files are parsed."""
    ruleset = rules.default()
    results: list[FileResult | None] = [None] * len(paths)
    pending: list[tuple[int, str, bytes]] = []
    for i, path in enumerate(paths):
        try:
            data = files.read(path)
        except files.Unreadable as exc:
            results[i] = FileResult(str(path), "failed", error=str(exc))
            continue
        if ruleset.may_apply(data):
            pending.append((i, str(path), data))
        else:
            results[i] = FileResult(str(path), "skipped")
    work = [(path, data, mode) for _, path, data in pending]
    if jobs > 1 and len(work) > 1:
        with ProcessPoolExecutor(max_workers=min(jobs, len(work))) as pool:
            done = pool.map(_rewrite_one, work, chunksize=max(1, len(work) // (jobs * 16)))
            _collect(done, pending, results, progress)
    else:
        _collect(map(_rewrite_one, work), pending, results, progress)
    return [r for r in results if r is not None]  # every slot is filled


def _collect(done, pending, results, progress) -> None:
    for n, ((i, _, _), result) in enumerate(zip(pending, done, strict=True), 1):
        results[i] = result
        if progress is not None:
            progress(n, len(pending))


def _rewrite_one(job: tuple[str, bytes, Mode]) -> FileResult:
    path, data, mode = job
    try:
        return rewrite_file(Path(path), data, mode)
    except Exception as exc:  # one bad file must not stop the others
        return FileResult(path, "failed", error=f"{path}: internal error: {type(exc).__name__}: {exc}")


def rewrite_file(path: Path, data: bytes, mode: Mode) -> FileResult:
    """Rewrite one file's content ``data``; in ``write`` mode, replace the file when it changes."""
    try:
        source = files.decode(path, data)
        result = rewrite_source(source, rules.default())
    except files.Unreadable as exc:
        return FileResult(str(path), "failed", error=str(exc))
    except SourceError as exc:
        return FileResult(str(path), "failed", error=f"{path}:{exc.line}: syntax error: {exc}")
    except RewriteError as exc:
        return FileResult(str(path), "failed", error=f"{path}: {exc}")
    if result.code == source:
        return FileResult(str(path), "unchanged", result.notes)
    diff = ""
    if mode == "diff":
        diff = "".join(difflib.unified_diff(
            split_lines(source), split_lines(result.code),
            fromfile=os.fspath(path), tofile=os.fspath(path),
        ))
    elif mode == "write":
        try:
            files.write_atomic(path, files.encode(result.code, data))
        except OSError as exc:
            return FileResult(str(path), "failed", result.notes, error=f"{path}: cannot write: {exc.strerror or exc}")
    return FileResult(str(path), "changed", result.notes, diff=diff)
