"""Fixtures of the runtime's tests: the runtime installed with the CPU as target; fresh interpreters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import torchdevice
from torchdevice.reporting.counts import reset as reset_report

ROOT = Path(__file__).resolve().parents[2]
CONSOLE_SCRIPT = str(Path(sys.executable).with_name("torchdevice"))

Run = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def on_cpu():
    """``"cuda"`` means the CPU for the duration of the test; counters start at zero."""
    reset_report()
    device = torchdevice.install("cpu")
    yield device
    torchdevice.uninstall()
    reset_report()


@pytest.fixture
def command() -> Run:
    """Run a command (``"python"`` and ``"torchdevice"`` are this environment's) with ``env`` added to the
    environment, without inherited ``TORCHDEVICE_*`` settings, on the cpu target unless ``env`` or the command names
    another (``TORCHDEVICE_TARGET=""``: the default), on one thread: workers share the cores; Ctrl-C
    interrupts it as in a terminal, also where the suite itself was started with SIGINT ignored (a background job)."""
    programs = {"python": sys.executable, "torchdevice": CONSOLE_SCRIPT}

    def run(program: str, *args: str, cwd: Path = ROOT,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
        environment.update({"OMP_NUM_THREADS": "1", "TORCHDEVICE_TARGET": "cpu", **(env or {})})
        return subprocess.run([programs.get(program, program), *args], cwd=cwd, env=environment,
                              capture_output=True, text=True, timeout=300, preexec_fn=_interruptible)

    return run


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def python(command: Run) -> Run:
    """``python ARGS`` in a fresh interpreter (see :func:`command`)."""
    return lambda *args, **kw: command("python", *args, **kw)
