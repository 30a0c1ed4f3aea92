"""Hugging Face accelerate's launcher on two emulated GPUs (on the CPU target, and two simulated GPUs):
``torchdevice run --devices 2 accelerate launch --multi_gpu --num_processes 2``, against the same program run
natively in one CPU process (training) and in two CPU processes (``gather_for_metrics``, ``reduce``, a torchmetrics
metric synced across them)."""

from __future__ import annotations

import pytest
from dist_jobs import free_port
from framework_runs import assert_numbers_close

PROGRAM = "accelerate_train.py"
TWO_CPU_PROCESSES = ("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2")


@pytest.mark.slow
@pytest.mark.parametrize("target", ["cpu", "cuda-sim"])
def test_launch_multi_gpu_trains_the_single_process_weights(native, redirected, target):
    (single,) = native(PROGRAM, "--cpu")
    launcher = ("-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                "--main_process_port", str(free_port()))
    ranks = redirected(PROGRAM, devices=2, launcher=launcher, target=target)
    assert [(r["rank"], r["processes"], r["device"], r["distributed"], r["backend"]) for r in ranks] == [
        (0, 2, "cuda:0", "DistributedType.MULTI_GPU", "nccl"), (1, 2, "cuda:1", "DistributedType.MULTI_GPU", "nccl")]
    assert ranks[0]["weights"] == ranks[1]["weights"]  # DDP keeps the replicas identical
    # Each rank's loss is the mean over its 8 of the 16 samples and DDP averages the gradients: the gradient
    # of the single process's 16-sample batch. Only the order of float32 sums differs.
    assert_numbers_close(ranks[0]["weights"], single["weights"])
    assert_numbers_close(ranks[0]["losses"], single["losses"])
    assert [r["initial_kept"] for r in ranks] == [True, True]  # prepare() moved a copy to the device
    # Evaluation: on NCCL accelerate gathers each batch's (4, 1) predictions into a flat tensor (gloo would
    # refuse those shapes), drops the samples the last batch repeats, and reduces with NCCL's SUM. The numbers
    # are those of the same program on two CPU processes with gloo.
    cpu = native(PROGRAM, "--cpu", launcher=TWO_CPU_PROCESSES)
    assert [(r["device"], r["distributed"], r["backend"]) for r in cpu] == [("cpu:0", "DistributedType.MULTI_CPU",
                                                                             "gloo")] * 2
    for mine, theirs in zip(ranks, cpu, strict=True):
        assert len(mine["predictions"]) == len(mine["targets"]) == 10
        assert mine["targets"] == theirs["targets"] and mine["reduced"] == theirs["reduced"] == {
            "sum": [3, 14], "mean": [1.0, 3.0]}
        assert_numbers_close(mine["predictions"], theirs["predictions"])
        assert_numbers_close(mine["error"], theirs["error"])
