"""The release tier's own programs (``make test-torch TORCH=2.x`` runs them with the fast tier and the other tests
marked ``release``): the example GPT written for CUDA, under ``torchdevice run`` on each target, gives the losses its
CPU-written twin gives when run plainly on the same torch release; and so it does when the installed release is one
torchdevice does not know (newer than the newest it knows), which runs on the newest known release's facts."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
import torchdevice_generated
from dist_jobs import ROOT, run

from torchdevice import releases

pytestmark = [pytest.mark.processes, pytest.mark.release]

STEPS = ("--steps", "4")


def losses(command: list[str], target: str | None = None, env: dict[str, str] | None = None) -> list[float]:
    done = run([sys.executable, *command], timeout=300, env={"TORCHDEVICE_TARGET": target or "", **(env or {})})
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


@pytest.fixture(scope="module")
def unknown(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str]:
    """The environment of a torchdevice that does not know the installed release (a copy of its generated package
    whose known releases stop before this one, first on the path), and the newest release it knows."""
    here = releases.release()
    older = [v for v in releases.known().values() if releases.release(v) < here]
    if not older:
        pytest.skip(f"no known release is older than torch {torch.__version__}")
    folder = tmp_path_factory.mktemp("unknown") / "torchdevice_generated"
    shutil.copytree(Path(torchdevice_generated.__file__).parent, folder, ignore=shutil.ignore_patterns("__pycache__"))
    with (folder / "releases.py").open("a", encoding="utf-8") as f:
        f.write(f"\nKNOWN = {tuple(older)!r}\nCHANGES = {{v: c for v, c in CHANGES.items() if v in KNOWN}}\n")
    return {"PYTHONPATH": os.pathsep.join(filter(None, (str(folder.parent), os.environ.get("PYTHONPATH"))))}, older[-1]


def test_doctor_says_an_unknown_release_runs_on_the_newest_knowns_facts(unknown):
    env, newest = unknown
    done = run([sys.executable, "-m", "torchdevice", "doctor"], timeout=120, env=env)
    assert done.returncode == 0, done.output
    major, minor = releases.release(newest)
    assert (f"facts: torch {torch.__version__} is newer than the newest known release ({major}.{minor}): the facts "
            f"(entry points, kernel tables, MPS's messages, CUDA's alerts) are torch {newest}'s") in done.stdout, \
        done.output


@pytest.mark.parametrize(("target", "rtol", "atol"), [(None, 2e-3, 1e-4), ("mps-sim", 2e-3, 1e-4)])
def test_on_an_unknown_release_the_gpt_example_gives_the_native_losses(native, unknown, target, rtol, atol):
    found = losses(["-m", "torchdevice", "run", str(ROOT / "examples" / "gpt_train.py"), *STEPS], target, unknown[0])
    torch.testing.assert_close(torch.tensor(found, dtype=torch.float64), torch.tensor(native, dtype=torch.float64),
                               rtol=rtol, atol=atol)
