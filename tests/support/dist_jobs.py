"""Real multi-process jobs on the loopback interface, one free port per job."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "distributed" / "programs"


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SUPPORT = Path(__file__).resolve().parent


def run(command: list[str], timeout: float, env: dict[str, str] | None = None) -> Finished:
    """Run ``command`` in its own session; on timeout kill that session (the launcher and its workers).

    The environment is this one without inherited ``TORCHDEVICE_*`` settings (a test's installation
    propagates through ``TORCHDEVICE_INSTALL``), on the cpu target unless ``env`` or the command names another, plus
    ``env``."""
    path = os.pathsep.join(filter(None, (str(SUPPORT), os.environ.get("PYTHONPATH"))))
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}
    environment = {**inherited, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "PYTHONPATH": path,
                   "TORCHDEVICE_TARGET": "cpu",
                   **(env or {})}
    start = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        pytest.fail(f"{' '.join(command)} still running after {timeout} s\n{stdout}\n{stderr}")
    return Finished(process.returncode, stdout, stderr, time.monotonic() - start)


def torchrun(nproc: int, *program: str, timeout: float = 90, torchdevice: bool = True,
             env: dict[str, str] | None = None) -> Finished:
    """``torchrun --nproc_per_node=N -m torchdevice run PROGRAM...`` on 127.0.0.1 and a free port (``env``: as
    :func:`run`'s); with ``torchdevice=False`` the program runs with plain torch, through :mod:`settled_exit`."""
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
    ]
    runner = ["torchdevice", "run"] if torchdevice else ["settled_exit"]
    command = [*launcher, "-m", *runner, *program]
    return run(command, timeout, env)
