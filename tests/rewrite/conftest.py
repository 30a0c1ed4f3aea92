"""Shared fixture of the rewrite tests: the command line, run for real in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def cli():
    """Run ``python -m torchdevice rewrite ARGS...`` in a subprocess; returns the CompletedProcess."""

    def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "torchdevice", "rewrite", *map(str, args)],
            cwd=cwd, capture_output=True, text=True, timeout=300,
        )

    return run
