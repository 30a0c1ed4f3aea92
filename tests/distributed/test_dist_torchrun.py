"""NCCL-written programs under ``torchrun --nproc_per_node=2 -m torchdevice run``: real processes, gloo, loopback."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from dist_jobs import PROGRAMS, ROOT, run, torchrun

pytestmark = pytest.mark.processes

EXAMPLE = "examples/ddp_train.py"
LOSS = re.compile(r"^epoch (\d+) micro (\d+) loss (\S+)$", re.MULTILINE)


def losses(output: str) -> list[float]:
    found = [float(value) for _, _, value in LOSS.findall(output)]
    assert found, output
    return found


@pytest.mark.release
def test_ddp_two_processes_match_one_process_with_the_same_global_batch():
    args = ["--global-batch", "8", "--accum", "2", "--bucket-cap-mb", "0.001"]
    single = run([sys.executable, "-m", "torchdevice", "run", EXAMPLE, *args], timeout=60)
    assert single.returncode == 0, single.output
    ddp = torchrun(2, EXAMPLE, *args)
    assert ddp.returncode == 0, ddp.output
    assert "4 optimizer steps on 2 process(es)" in ddp.stdout
    # Same global batch, so the same math; float32 gradients averaged by gloo's allreduce are summed in
    # another order than one process sums its batch: a few ulps per step, far below a step's change.
    assert losses(ddp.stdout) == pytest.approx(losses(single.stdout), rel=1e-5, abs=1e-7)


def test_collectives_on_cuda_tensors():
    result = torchrun(2, str(PROGRAMS / "collectives.py"))
    assert result.returncode == 0, result.output
    assert sorted(re.findall(r"rank \d ok", result.stdout)) == ["rank 0 ok", "rank 1 ok"]


@pytest.mark.slow
def test_nccl_reduce_ops_as_nccl_computes_them():
    """Every reduce op on every dtype through all_reduce, reduce, reduce_scatter(_tensor), all_reduce_coalesced,
    sync and async, against references the program computes; NCCL's refusals at the call."""
    result = torchrun(2, str(PROGRAMS / "reduce_ops.py"), timeout=120)
    assert result.returncode == 0, result.output
    counts = re.findall(r"rank (\d) ok: (\d+) cases", result.stdout)
    assert sorted(counts) == [("0", counts[0][1]), ("1", counts[0][1])] and int(counts[0][1]) > 1000, result.stdout


def test_a_failing_rank_fails_the_run_quickly_with_its_error():
    result = torchrun(2, str(PROGRAMS / "fails_on_one_rank.py"), timeout=60)
    assert result.returncode != 0
    assert "RuntimeError: rank 1 failed on purpose" in result.output


def test_rewritten_program_runs_under_plain_torchrun(tmp_path: Path):
    pytest.importorskip("torchdevice.rewrite", reason="the source rewriter (torchdevice.rewrite) is not here")
    program = tmp_path / "ddp_train.py"
    shutil.copy(ROOT / EXAMPLE, program)
    rewritten = run([sys.executable, "-m", "torchdevice", "rewrite", str(program), "--write"], timeout=60)
    assert rewritten.returncode == 0, rewritten.output
    result = torchrun(2, str(program), torchdevice=False)
    assert result.returncode == 0, result.output
    assert "4 optimizer steps on 2 process(es)" in result.stdout
