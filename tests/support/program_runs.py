"""Test programs (``tests/processes/programs/``) run through ``torchdevice run`` or plain ``python``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dist_jobs import Finished, run

PROGRAMS = Path(__file__).resolve().parents[1] / "processes" / "programs"


def torchdevice_run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Finished:
    """``python -m torchdevice run ARGS`` (program paths relative to ``programs/``), in its own session."""
    return run([sys.executable, "-m", "torchdevice", "run", *_programs(args)], timeout, env)


def python(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Finished:
    """``python ARGS``: plain torch, no torchdevice."""
    return run([sys.executable, *_programs(args)], timeout, env)


def json_lines(done: Finished) -> list[dict]:
    """The JSON lines a program printed, after checking it succeeded."""
    assert done.returncode == 0, done.output
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _programs(args: tuple[str, ...]) -> list[str]:
    return [str(PROGRAMS / a) if (PROGRAMS / a).is_file() else a for a in args]
