"""Hugging Face accelerate's launcher on two emulated GPUs: ``torchdevice run --devices 2 accelerate launch
--multi_gpu --num_processes 2``, against the same program run natively in one CPU process."""

from __future__ import annotations

import pytest
from dist_jobs import free_port
from framework_runs import assert_numbers_close

PROGRAM = "accelerate_train.py"


@pytest.mark.slow
def test_launch_multi_gpu_trains_the_single_process_weights(native, redirected):
    (single,) = native(PROGRAM, "--cpu")
    launcher = ("-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                "--main_process_port", str(free_port()))
    ranks = redirected(PROGRAM, devices=2, launcher=launcher)
    assert [(r["rank"], r["processes"], r["device"], r["distributed"], r["backend"]) for r in ranks] == [
        (0, 2, "cuda:0", "DistributedType.MULTI_GPU", "nccl"), (1, 2, "cuda:1", "DistributedType.MULTI_GPU", "nccl")]
    assert ranks[0]["weights"] == ranks[1]["weights"]  # DDP keeps the replicas identical
    # Each rank's loss is the mean over its 8 of the 16 samples and DDP averages the gradients: the gradient
    # of the single process's 16-sample batch. Only the order of float32 sums differs.
    assert_numbers_close(ranks[0]["weights"], single["weights"])
    assert_numbers_close(ranks[0]["losses"], single["losses"])
    assert [r["initial_kept"] for r in ranks] == [True, True]  # prepare() moved a copy to the device
