"""The command line's conventions: ``--version``, and a reader that goes away is no error of ours."""

from __future__ import annotations

import subprocess
import sys

import pytest

import torchdevice

pytestmark = pytest.mark.processes


def test_version_is_the_distributions():
    done = subprocess.run([sys.executable, "-m", "torchdevice", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"torchdevice {torchdevice.__version__}"


@pytest.mark.parametrize("args", [("catalog", "stats"), ("catalog", "show", "torch.zeros"), ("doctor",)])
def test_a_closed_pipe_ends_the_command_quietly(args):
    """``torchdevice catalog stats | head -1``: the reader closes the pipe; no traceback follows."""
    process = subprocess.Popen([sys.executable, "-m", "torchdevice", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the command writes anything: every write meets a closed pipe
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 1
    assert stderr == ""
