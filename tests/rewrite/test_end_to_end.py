"""CUDA-written programs, rewritten, run with plain torch here (no CUDA, no torchdevice): a training loop (which
trains like its CPU twin), the torchrun + DDP recipe on ``LOCAL_RANK``, a launcher of one process per GPU, and
streams, events and memory statistics."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dist_jobs import torchrun

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


def test_rewritten_program_matches_original_under_torchdevice_run(training):
    original = subprocess.run([sys.executable, "-m", "torchdevice", "run", str(FIXTURES / "train_cuda.py")],
                              capture_output=True, text=True, timeout=300)
    # Not bit for bit: under the runtime torch.cuda.amp.autocast() is CUDA's (float16, CUDA's policy); the
    # rewritten program's autocast on the CPU is the CPU's (bfloat16, the CPU's policy).
    rewritten = [float(line.split()[-1]) for line in _losses(_plain(training))]
    assert rewritten == pytest.approx([float(line.split()[-1]) for line in _losses(original)], rel=1e-2)


def test_the_torchrun_ddp_recipe_runs_under_plain_torchrun(tmp_path):
    program = _rewritten(PROGRAMS / "ddp_local_rank.py", tmp_path)
    result = torchrun(2, str(program), str(tmp_path / "checkpoint.pt"), torchdevice=False)
    assert result.returncode == 0, result.output
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("rank ")) == [
        "rank 0 of 2 done on cpu", "rank 1 of 2 done on cpu"]


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
