"""The release tier's own programs (``make test-torch TORCH=2.x`` runs them with the fast tier and the other tests
marked ``release``): the example GPT written for CUDA, under ``torchdevice run`` on each target, gives the losses its
CPU-written twin gives when run plainly on the same torch release; and so it does when the installed release is one
torchdevice does not know (newer than the newest it knows), whose own files are then scanned at first use (MPS's
messages and CUDA's alerts the newest known release's)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from catalog_release import unknown_release
from dist_jobs import ROOT, run, torchrun

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
    return unknown_release(tmp_path_factory.mktemp("unknown"))


def doctor(env: dict[str, str]) -> tuple[str, str]:
    """``torchdevice doctor``'s facts line, and what it said at INFO."""
    done = run([sys.executable, "-m", "torchdevice", "doctor"], timeout=300, env={**env, "TORCHDEVICE_LOG": "info"})
    assert done.returncode == 0, done.output
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("facts: ")]
    return line, done.stderr


def test_an_unknown_release_is_scanned_at_its_first_use_and_said(tmp_path):
    env, newest = unknown_release(tmp_path)
    major, minor = releases.release(newest)
    line, said = doctor(env)
    newer = f"facts: torch {torch.__version__} is newer than the newest known release ({major}.{minor})"
    cache = Path(env["TORCHDEVICE_CACHE_DIR"]) / "releases"
    assert line.startswith(f"{newer}: its entry points, kernel tables and autocast lists are its own (scanned at "
                           f"first use into {cache}{os.sep}torch-{torch.__version__}-"), line
    assert line.endswith(f".py); MPS's messages and CUDA's alerts are torch {newest}'s"), line
    assert f"scanning its own files into {cache} (once per torch and torchdevice" in said, said
    assert f"scanned torch {torch.__version__}'s own files in " in said, said
    again, said = doctor(env)  # a later process reads the scan
    assert again == line
    assert "scann" not in said, said


def test_a_scan_that_failed_is_said_and_not_tried_again(tmp_path):
    env, newest = unknown_release(tmp_path, drop=("catalog.jsonl",))  # what the scan compares its catalog rows with
    major, minor = releases.release(newest)
    line, said = doctor(env)
    assert line.startswith(f"facts: torch {torch.__version__} is newer than the newest known release ({major}.{minor})"
                           f": the facts (entry points, kernel tables, MPS's messages, CUDA's alerts) are torch "
                           f"{newest}'s; its own could not be scanned: its scan failed: KeyError: "
                           "'torchdevice_generated/catalog.jsonl'"), line
    assert "; the newest known release's facts are used" in said, said
    again, said = doctor(env)
    assert again == line
    assert "scann" not in said, said


@pytest.mark.parametrize(("target", "rtol", "atol"), [(None, 2e-3, 1e-4), ("mps-sim", 2e-3, 1e-4)])
def test_on_an_unknown_release_the_gpt_example_gives_the_native_losses(native, unknown, target, rtol, atol):
    found = losses(["-m", "torchdevice", "run", str(ROOT / "examples" / "gpt_train.py"), *STEPS], target, unknown[0])
    torch.testing.assert_close(torch.tensor(found, dtype=torch.float64), torch.tensor(native, dtype=torch.float64),
                               rtol=rtol, atol=atol)


def test_on_an_unknown_release_torchruns_workers_scan_once_and_train(tmp_path):
    """Two workers start together on a release no scan was made of: one scans, the other waits for it and reads it."""
    env, _ = unknown_release(tmp_path)
    done = torchrun(2, str(ROOT / "examples" / "ddp_train.py"), "--global-batch", "8", "--accum", "2", timeout=300,
                    env={**env, "TORCHDEVICE_LOG": "info"})
    assert done.returncode == 0, done.output
    assert "4 optimizer steps on 2 process(es)" in done.stdout
    assert done.stderr.count("scanning its own files into") == 1, done.stderr
    cache = Path(env["TORCHDEVICE_CACHE_DIR"]) / "releases"
    assert len(list(cache.glob("*.py"))) == 1 and not list(cache.glob("*.failed.txt"))

