"""The release tier's own programs (``make test-torch TORCH=2.x`` runs them with the fast tier and the other tests
marked ``release``): the example GPT written for CUDA, under ``torchdevice run`` on each target, gives the losses its
CPU-written twin gives when run plainly on the same torch release."""

from __future__ import annotations

import sys

import pytest
import torch
from dist_jobs import ROOT, run

pytestmark = [pytest.mark.processes, pytest.mark.release]

STEPS = ("--steps", "4")


def losses(command: list[str], target: str | None = None) -> list[float]:
    done = run([sys.executable, *command], timeout=300, env={"TORCHDEVICE_TARGET": target or ""})
    assert done.returncode == 0, done.output
    found = [float(line) for line in done.stdout.split()]
    assert len(found) == 4, done.output
    return found


@pytest.fixture(scope="module")
def native() -> list[float]:
    return losses([str(ROOT / "examples" / "gpt_train_cpu.py"), *STEPS])


@pytest.mark.parametrize(("target", "rtol", "atol"), [
    ("cpu", 0, 2e-6),  # the same CPU kernels; six decimals printed: one rounding step at most
    (None, 2e-3, 1e-4),  # the default (a simulated GPU): CUDA's autocast lists, bf16 rounding in another order
    ("mps-sim", 2e-3, 1e-4),  # MPS's autocast lists and kernels; a wrong kernel moves a loss by 1e-1
])
def test_the_gpt_example_gives_the_native_losses_of_this_release(native, target, rtol, atol):
    found = losses(["-m", "torchdevice", "run", str(ROOT / "examples" / "gpt_train.py"), *STEPS], target)
    torch.testing.assert_close(torch.tensor(found, dtype=torch.float64), torch.tensor(native, dtype=torch.float64),
                               rtol=rtol, atol=atol)
