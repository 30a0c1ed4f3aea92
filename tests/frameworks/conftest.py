"""Programs written with real frameworks (``programs/``), each run twice in real subprocesses: natively on
the CPU (its CUDA spelling replaced by a flag) and under ``torchdevice run``. Every program writes one JSON
record per rank, ``OUT_DIR/rank<N>.json``, which the tests compare."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from framework_runs import PROGRAMS, Records, records


@pytest.fixture(scope="session")
def native(tmp_path_factory) -> Callable[..., Records]:
    """``native(PROGRAM, *ARGS, launcher=(...))``: the records of ``python [LAUNCHER...] -m settled_exit PROGRAM
    OUT_DIR ARGS`` with plain torch, each distinct run once per test process."""
    done: dict[tuple[str, ...], Records] = {}

    def run(program: str, *args: str, launcher: tuple[str, ...] = (), timeout: float = 300) -> Records:
        key = (*launcher, program, *args)
        if key not in done:
            out = tmp_path_factory.mktemp(Path(program).stem)
            command = [sys.executable, *launcher, "-m", "settled_exit", str(PROGRAMS / program), str(out), *args]
            done[key] = records(out, command, timeout)
        return done[key]

    return run


@pytest.fixture
def redirected(tmp_path) -> Callable[..., Records]:
    """``redirected(PROGRAM, *ARGS, devices=N, launcher=(...), target=T, gpu=G, gpu_memory=M)``: the records of
    ``torchdevice run --target T --devices N [--gpu G] [--gpu-memory M] [LAUNCHER...] PROGRAM OUT_DIR ARGS``, each
    run with an ``OUT_DIR`` of its own."""

    def run(program: str, *args: str, devices: int = 1, launcher: tuple[str, ...] = (), target: str = "cpu",
            gpu: str | None = None, gpu_memory: str | None = None, timeout: float = 300) -> Records:
        out = Path(tempfile.mkdtemp(prefix="out", dir=tmp_path))
        card = [*(("--gpu", gpu) if gpu else ()), *(("--gpu-memory", gpu_memory) if gpu_memory else ())]
        command = [sys.executable, "-m", "torchdevice", "run", "--target", target, "--devices", str(devices), *card,
                   *launcher, str(PROGRAMS / program), str(out), *args]
        return records(out, command, timeout)

    return run
