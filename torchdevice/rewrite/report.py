"""What ``torchdevice rewrite`` tells the user: per-file lines, reports, the summary, the exit status."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import TextIO

from torchdevice.rewrite import REQUIRES_TORCH
from torchdevice.rewrite.jobs import FileResult, Mode
from torchdevice.source.notebooks import place

EXIT_CHANGES = 1
EXIT_FAILED = 123

_DONE = {"check": "would rewrite", "diff": "would rewrite", "write": "rewrote"}
_CHANGED = {"check": "would be rewritten", "diff": "would be rewritten", "write": "rewritten"}


def print_results(results: Sequence[FileResult], mode: Mode, out: TextIO, err: TextIO) -> None:
    """Diffs on ``out``; what changed, reports (``path:line:column: CODE message``), files set aside and errors
    on ``err``."""
    for r in results:
        if r.diff:
            out.write(r.diff)
        if r.status == "changed":
            print(f"{_DONE[mode]} {r.path}", file=err)
        for note in r.notes:
            print(f"{place(r.path, note.cell, note.line)}:{note.column}: {note.code} {note.message}", file=err)
        for number, why in r.cells:
            print(f"skipped {r.path}:cell {number}: {why}", file=err)
        if r.status == "skipped":
            print(f"skipped {r.path}: {r.reason}", file=err)
        elif r.status == "failed":
            print(f"error: {r.reason}", file=err)


def summary(results: Sequence[FileResult], mode: Mode, seconds: float) -> str:
    counts = Counter(r.status for r in results)
    files = "file" if len(results) == 1 else "files"
    sites = sum(n for r in results for n in r.sites.values())
    reported = sum(len(r.notes) for r in results)
    text = (
        f"{len(results)} {files} scanned in {seconds:.1f}s: {counts['changed']} {_CHANGED[mode]}, "
        f"{counts['unchanged']} unchanged, {counts['clean']} without CUDA code, {counts['skipped']} skipped, "
        f"{counts['failed']} failed; {sites} sites rewritten, {reported} reported"
    )
    if counts["changed"]:
        text += f"; the rewritten code needs torch>={'.'.join(map(str, REQUIRES_TORCH))}"
    return text


def exit_status(results: Sequence[FileResult], mode: Mode) -> int:
    if any(r.status == "failed" for r in results):
        return EXIT_FAILED
    if mode != "write" and any(r.status == "changed" for r in results):
        return EXIT_CHANGES
    return 0


class Progress:
    """``done/total`` on one terminal line, for runs longer than a second, redrawn ten times a second."""

    AFTER = 1.0

    def __init__(self, stream: TextIO = sys.stderr) -> None:
        self.stream = stream
        self.enabled = stream.isatty()
        self.start = self.last = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.start < self.AFTER or now - self.last < 0.1:
            return
        self.last, self.shown = now, True
        self.stream.write(f"\rrewrite: {done}/{total} files parsed")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
