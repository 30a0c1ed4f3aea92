"""A CUDA-written training program, rewritten, runs with plain torch here and trains like its CPU twin."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = FIXTURES.parents[2]

# Runs a program like `python PROGRAM` in isolated mode, then checks torchdevice was never imported.
PLAIN_PYTHON = (
    "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__'); "
    "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('torchdevice', 'torchdevice_generated')); "
    "assert not loaded, f'torchdevice was imported: {loaded}'"
)


def _losses(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert len(lines) == 5, result.stdout
    return lines


def _plain(program: Path) -> list[str]:
    return _losses(subprocess.run([sys.executable, "-I", "-c", PLAIN_PYTHON, str(program)],
                                  capture_output=True, text=True, timeout=300))


@pytest.fixture(scope="module")
def rewritten(tmp_path_factory) -> Path:
    program = tmp_path_factory.mktemp("e2e") / "train_cuda.py"
    shutil.copy(FIXTURES / "train_cuda.py", program)
    result = subprocess.run([sys.executable, "-m", "torchdevice", "rewrite", "--write", str(program)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    text = program.read_text()
    assert "cuda" not in text.replace("torch.accelerator", ""), text
    return program


def test_rewritten_program_runs_with_plain_torch_like_the_cpu_version(rewritten):
    assert _plain(rewritten) == _plain(FIXTURES / "train_cpu.py")


def test_rewritten_program_matches_original_under_torchdevice_run(rewritten):
    original = subprocess.run([sys.executable, "-m", "torchdevice", "run", str(FIXTURES / "train_cuda.py")],
                              capture_output=True, text=True, timeout=300)
    assert _plain(rewritten) == _losses(original)
