"""Check files: found, read and spread over worker processes as ``torchdevice rewrite`` does (``source``); a
notebook's code cells are checked as one module (:mod:`torchdevice.source.notebooks`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from torchdevice.check.analyze import Finding, check_source, may_find
from torchdevice.source import files, notebooks
from torchdevice.source.pool import parallel


@dataclass(frozen=True)
class FileReport:
    path: str
    findings: tuple[Finding, ...] = ()
    error: str = field(default="")
    """Why the file could not be checked (``path[:line]: reason``), else empty."""
    skipped: str = ""
    """Why the file was set aside unread (``--max-file-size``, a link out of the paths...), else empty."""
    cells: tuple[tuple[int, str], ...] = ()
    """In a notebook: (number, why) of the code cells set aside (IPython cell magics, cells that do not parse)."""


def check_files(found: Sequence[files.Found], target: str, jobs: int, max_bytes: int | None,
                progress: Callable[[int, int], None] | None = None) -> list[FileReport]:
    """One report per file found, in order; ``progress(done, total)`` is called as files are done."""
    tasks = [(str(item.path), item.skip, target, max_bytes) for item in found]
    reports: list[FileReport] = []
    with parallel(check_file, tasks, jobs) as done:
        for report in done:
            reports.append(report)
            if progress is not None:
                progress(len(reports), len(tasks))
    return reports


def check_file(task: tuple[str, str, str, int | None]) -> FileReport:
    """Read and check one file; files that mention nothing the check knows are not parsed."""
    path, skip, target, max_bytes = task
    if skip:
        return FileReport(path, skipped=skip)
    try:
        if notebooks.is_notebook(path):
            notebook, _ = notebooks.load(Path(path), max_bytes)
            found = check_source(notebook.script, path, target) if may_find(notebook.script.encode(), target) else []
            located = tuple(replace(f, cell=cell, line=line)
                            for f in found for cell, line in [notebook.cells.locate(f.line)])
            return FileReport(path, located, cells=notebook.cells.skipped)
        data, _ = files.read(Path(path), max_bytes)
        if not may_find(data, target):
            return FileReport(path)
        source, _ = files.decode(Path(path), data)
        return FileReport(path, tuple(check_source(source, path, target)))
    except files.Skipped as exc:
        return FileReport(path, skipped=str(exc))
    except files.Unreadable as exc:
        return FileReport(path, error=str(exc))
    except SyntaxError as exc:
        return FileReport(path, error=f"{path}:{exc.lineno}: syntax error: {exc.msg}")
    except (RecursionError, MemoryError):
        return FileReport(path, error=f"{path}: too deeply nested to parse")
