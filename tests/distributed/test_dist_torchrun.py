"""NCCL-written programs under ``torchrun --nproc_per_node=2 -m torchdevice run``: real processes, gloo, loopback."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from dist_jobs import PROGRAMS, ROOT, Finished, run, torchrun

EXAMPLE = "examples/ddp_train.py"
LOSS = re.compile(r"^epoch (\d+) micro (\d+) loss (\S+)$", re.MULTILINE)
EXIT_CODES = re.compile(r"exitcode\s*:\s*(-?\d+)")

# Plain torch with gloo sometimes aborts at interpreter exit: a gloo thread releases a finished
# collective's tensors while the interpreter shuts down ("terminate called without an active exception",
# SIGABRT; torchrun then stops the other ranks with SIGTERM). torchdevice spares its own runs
# (torchdevice/distributed/groups.py); a program run without it cannot be spared, so that failure, and
# only after the program printed its result, earns the plain-torchrun test one retry.
TEARDOWN_ABORT = "terminate called without an active exception"
ABORTED, TERMINATED = "-6", "-15"


def losses(output: str) -> list[float]:
    found = [float(value) for _, _, value in LOSS.findall(output)]
    assert found, output
    return found


def aborted_at_exit(result: Finished, done: str) -> bool:
    """The run printed ``done``, then a rank died of gloo's abort at exit and the launcher stopped the others."""
    codes = set(EXIT_CODES.findall(result.stderr))
    return (result.returncode != 0 and done in result.stdout and TEARDOWN_ABORT in result.stderr
            and ABORTED in codes and codes <= {ABORTED, TERMINATED})


def test_ddp_two_processes_match_one_process_with_the_same_global_batch():
    args = ["--global-batch", "8", "--accum", "2", "--bucket-cap-mb", "0.001"]
    single = run([sys.executable, "-m", "torchdevice", "run", EXAMPLE, *args], timeout=60)
    assert single.returncode == 0, single.output
    ddp = torchrun(2, EXAMPLE, *args)
    assert ddp.returncode == 0, ddp.output
    assert "4 optimizer steps on 2 process(es)" in ddp.stdout
    assert losses(ddp.stdout) == pytest.approx(losses(single.stdout), rel=1e-5, abs=1e-7)


def test_collectives_on_cuda_tensors():
    result = torchrun(2, str(PROGRAMS / "collectives.py"))
    assert result.returncode == 0, result.output
    assert sorted(re.findall(r"rank \d ok", result.stdout)) == ["rank 0 ok", "rank 1 ok"]


def test_a_failing_rank_fails_the_run_quickly_with_its_error():
    result = torchrun(2, str(PROGRAMS / "fails_on_one_rank.py"), timeout=60)
    assert result.returncode != 0
    assert "RuntimeError: rank 1 failed on purpose" in result.output
    assert not aborted_at_exit(result, "")


def test_the_retry_condition_matches_an_abort_at_exit_after_the_result():
    result = torchrun(2, str(PROGRAMS / "aborts_at_exit.py"), torchdevice=False)
    assert aborted_at_exit(result, "done"), result.output
    assert not aborted_at_exit(result, "a result never printed")


def test_rewritten_program_runs_under_plain_torchrun(tmp_path: Path):
    pytest.importorskip("torchdevice.rewrite", reason="the source rewriter (torchdevice.rewrite) is not here")
    program = tmp_path / "ddp_train.py"
    shutil.copy(ROOT / EXAMPLE, program)
    rewritten = run([sys.executable, "-m", "torchdevice", "rewrite", str(program), "--write"], timeout=60)
    assert rewritten.returncode == 0, rewritten.output
    done = "4 optimizer steps on 2 process(es)"
    result = torchrun(2, str(program), torchdevice=False)
    if aborted_at_exit(result, done):
        result = torchrun(2, str(program), torchdevice=False)  # once, see TEARDOWN_ABORT
    assert result.returncode == 0, result.output
    assert done in result.stdout
