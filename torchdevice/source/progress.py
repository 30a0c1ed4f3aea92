"""A long run's progress on a terminal: ``done/total`` on one line of stderr, nothing where stderr is not a terminal
(as pip and ruff do), shown only for runs longer than a second and erased at the end (``rewrite``, ``check``)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``LABEL: done/total files WHAT`` on one terminal line, for runs longer than a second, redrawn ten times a
    second; :meth:`clear` erases it."""

    AFTER = 1.0

    def __init__(self, label: str, what: str, stream: TextIO = sys.stderr) -> None:
        self.label, self.what = label, what
        self.stream = stream
        self.enabled = stream.isatty()
        self.start = self.last = time.monotonic()
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.start < self.AFTER or now - self.last < 0.1:
            return
        self.last, self.shown = now, True
        self.stream.write(f"\r{self.label}: {done}/{total} files {self.what}")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
