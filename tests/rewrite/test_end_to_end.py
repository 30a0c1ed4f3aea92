"""CUDA-written programs, rewritten, run with plain torch here (no CUDA, no torchdevice): a training loop (which
trains like its CPU twin), the torchrun + DDP recipe on ``LOCAL_RANK`` (also with two ranks on an accelerator
with one device, simulated by :mod:`one_device`), a launcher of one process per GPU, and streams, events and
memory statistics."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dist_jobs import SUPPORT, free_port, run, torchrun

pytestmark = pytest.mark.processes

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
PROGRAMS = HERE / "programs"

# Runs a program like `python PROGRAM` in isolated mode, then checks torchdevice was never imported.
PLAIN_PYTHON = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__'); "
    "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('torchdevice', 'torchdevice_generated')); "
    "assert not loaded, f'torchdevice was imported: {loaded}'"
)


def _plain(program: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-I", "-c", PLAIN_PYTHON, str(program), *args],
                          capture_output=True, text=True, timeout=300)


def _rewritten(source: Path, directory: Path) -> Path:
    """``source`` copied to ``directory`` and rewritten there with ``--write``; a second run has nothing to do."""
    program = directory / source.name
    shutil.copy(source, program)
    for mode in ("--write", "--check"):
        result = subprocess.run([sys.executable, "-m", "torchdevice", "rewrite", mode, str(program)],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
    assert "0 would be rewritten" in result.stderr
    return program


def _losses(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert len(lines) == 5, result.stdout
    return lines


@pytest.fixture(scope="module")
def training(tmp_path_factory) -> Path:
    return _rewritten(FIXTURES / "train_cuda.py", tmp_path_factory.mktemp("train"))


def test_rewritten_program_runs_with_plain_torch_like_the_cpu_version(training):
    assert _losses(_plain(training)) == _losses(_plain(FIXTURES / "train_cpu.py"))


def _under_torchdevice(program: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchdevice", "run", str(program)],
                          capture_output=True, text=True, timeout=300)


def test_rewritten_program_matches_original_under_torchdevice_run(training):
    # Both run where the emulated CUDA is the accelerator: the rewritten code picks it as the original picks
    # "cuda", and both draw their "cuda" random numbers from the emulated CUDA generator, as on a GPU.
    assert _losses(_under_torchdevice(training)) == _losses(_under_torchdevice(FIXTURES / "train_cuda.py"))


def test_the_torchrun_ddp_recipe_runs_under_plain_torchrun(tmp_path):
    program = _rewritten(PROGRAMS / "ddp_local_rank.py", tmp_path)
    result = torchrun(2, str(program), str(tmp_path / "checkpoint.pt"), torchdevice=False)
    assert result.returncode == 0, result.output
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("rank ")) == [
        "rank 0 of 2 done on cpu", "rank 1 of 2 done on cpu"]


def _on_one_device(*command: str) -> subprocess.CompletedProcess[str] | object:
    """``command`` (after ``python -m``) run with ``tests/rewrite`` importable (for :mod:`one_device`)."""
    return run([sys.executable, "-m", *command], timeout=120,
               env={"PYTHONPATH": os.pathsep.join((str(SUPPORT), str(HERE)))})


def test_the_torchrun_ddp_recipe_runs_two_ranks_on_an_accelerator_with_one_device(tmp_path):
    program = _rewritten(PROGRAMS / "ddp_local_rank.py", tmp_path)
    result = _on_one_device("torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                            f"--master_port={free_port()}", "-m", "one_device", str(program),
                            str(tmp_path / "checkpoint.pt"))
    assert result.returncode == 0, result.output
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("rank ")) == [
        "rank 0 of 2 done on cpu", "rank 1 of 2 done on cpu"]


@pytest.mark.parametrize("request_", [
    "torch.zeros(1).to(torch.device(_DEVICE.type, 1))",  # what .to(local_rank) became on rank 1 before
    "torch.ones(1, device=f'{_DEVICE.type}:1')",
    "torch.accelerator.set_device_index(1)",
])
def test_the_one_device_simulation_refuses_device_1(request_, tmp_path):
    program = tmp_path / "asks.py"
    program.write_text("import torch\n_DEVICE = torch.accelerator.current_accelerator(check_available=True)\n"
                       f"{request_}\n")
    result = _on_one_device("one_device", str(program))
    assert result.returncode == 1 and "the accelerator has one device" in result.stderr, result.output


def test_a_launcher_of_one_process_per_gpu_starts_one_without_gpus(tmp_path):
    program = _rewritten(PROGRAMS / "spawn_per_gpu.py", tmp_path)
    result = _plain(program)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["worker 0 of 1 on cpu"]


def test_streams_events_and_memory_statistics_run_without_an_accelerator(tmp_path):
    program = _rewritten(PROGRAMS / "streams_events.py", tmp_path)
    result = _plain(program)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("loss ") and " on cpu, nan ms, peak 0.0 MiB" in result.stdout
