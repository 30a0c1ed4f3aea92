"""pytorch-ignite's launcher on two emulated GPUs: ``idist.Parallel(backend="nccl", nproc_per_node=2)``,
against the same program on gloo natively."""

from __future__ import annotations

import pytest
from framework_runs import assert_numbers_close

PROGRAM = "ignite_parallel.py"


@pytest.mark.slow
def test_parallel_on_nccl_runs_collectives_and_training_like_gloo(native, redirected):
    cpu = native(PROGRAM, "--backend", "gloo")
    gpu = redirected(PROGRAM, devices=2)
    assert [(r["rank"], r["local_rank"], r["world"], r["device"], r["backend"]) for r in gpu] == [
        (0, 0, 2, "cuda:0", "nccl"), (1, 1, 2, "cuda:1", "nccl")]
    for record in gpu:
        assert record["gathered"] == [1.0] * 3 + [2.0] * 3
        assert record["summed"] == [3.0] * 3
        assert record["shared"] == [0.0, 7.0, 14.0, 21.0]  # rank 0's tensor
    assert gpu[0]["weights"] == gpu[1]["weights"]
    for mine, theirs in zip(gpu, cpu, strict=True):
        assert_numbers_close(mine["losses"], theirs["losses"])
        assert_numbers_close(mine["weights"], theirs["weights"])
