"""PyTorch Lightning's ``Trainer(accelerator="gpu")`` under the runtime against ``accelerator="cpu"`` natively:
the same losses step by step and the same weights (float32), real autocast for mixed precision, and the same
per-rank losses for the ddp strategies on two emulated GPUs, with the same values logged with
``sync_dist=True`` and the same torchmetrics metrics synced across the ranks."""

from __future__ import annotations

import pytest
import torch
from framework_runs import assert_numbers_close

PROGRAM = "lightning_fit.py"


@pytest.mark.processes
@pytest.mark.parametrize("target", ["cpu", "cuda-sim"])
def test_32_true_trains_on_the_gpu_with_the_cpu_numbers(native, redirected, target):
    """On the CPU target and on the simulated GPU, whose tensors are CUDA's for Lightning too."""
    (cpu,) = native(PROGRAM, "--accelerator", "cpu")
    (gpu,) = redirected(PROGRAM, target=target)
    assert (gpu["on"], gpu["cuda_current"], cpu["on"]) == ("cuda:0", 0, "cpu")
    assert (gpu["root_device"], gpu["accelerator"]) == ("cuda:0", "CUDAAccelerator")
    assert (cpu["root_device"], cpu["accelerator"]) == ("cpu", "CPUAccelerator")
    assert len(gpu["losses"]) == 16 and gpu["losses"][-1] < 0.6 * gpu["losses"][0]  # it learns
    assert_numbers_close(gpu["losses"], cpu["losses"])
    assert_numbers_close(gpu["weights"], cpu["weights"])
    assert [sorted(epoch) for epoch in gpu["logged"]] == [LOGGED, LOGGED]
    assert_numbers_close(gpu["logged"], cpu["logged"])
    assert gpu["autocast"]["enabled"] is False
    assert gpu["autocast"]["linear"] == gpu["autocast"]["log_softmax"] == "torch.float32"


LOGGED = ["train_accuracy", "train_loss", "val_accuracy", "val_error", "val_loss", "val_seen"]


# Mixed precision is compared with the float32 run within about five units of the low-precision dtype's
# epsilon (float16 9.8e-4, bfloat16 7.8e-3); measured: 5.3e-4 and 3.8e-3 at most over the 16 steps.
MIXED = [("16-mixed", torch.float16, 5e-3), ("bf16-mixed", torch.bfloat16, 4e-2)]


@pytest.mark.parametrize("target", ["cpu", "mps-sim", "cuda-sim"])
@pytest.mark.parametrize(("precision", "dtype", "rtol"), MIXED, ids=[m[0] for m in MIXED])
@pytest.mark.processes
def test_mixed_precision_runs_under_cuda_autocast(native, redirected, precision, dtype, rtol, target):
    """On the CPU target, on the simulated Mac, whose device tensors are cast as a Mac casts them, and on the
    simulated GPU, whose are cast as a GPU casts them."""
    (cpu,) = native(PROGRAM, "--accelerator", "cpu")
    (gpu,) = redirected(PROGRAM, "--precision", precision, target=target)
    assert_numbers_close(gpu["losses"], cpu["losses"], rtol=rtol, atol=0)
    # The forward ran under autocast("cuda", dtype): the linear layers in the low precision, log_softmax in
    # float32 as CUDA's policy says (ATen's autocast_mode.h: log_softmax is in AT_FORALL_FP32).
    assert gpu["autocast"] == {"enabled": True, "dtype": str(dtype), "linear": str(dtype),
                               "log_softmax": "torch.float32"}


@pytest.mark.slow
@pytest.mark.parametrize(("strategy", "target"), [("ddp", "cuda-sim"), ("ddp_spawn", "cpu"), ("ddp_spawn", "cuda-sim")])
def test_ddp_strategies_on_two_gpus_give_the_cpu_losses(native, redirected, strategy, target):
    cpu = native(PROGRAM, "--accelerator", "cpu", "--strategy", strategy, "--devices", "2")
    gpu = redirected(PROGRAM, "--strategy", strategy, "--devices", "2", devices=2, target=target)
    assert [(r["rank"], r["world_size"], r["on"], r["cuda_current"]) for r in gpu] == [
        (0, 2, "cuda:0", 0), (1, 2, "cuda:1", 1)]
    # Each rank sees its own shard: its losses are the CPU run's for the same rank, step by step.
    for mine, theirs in zip(gpu, cpu, strict=True):
        assert_numbers_close(mine["losses"], theirs["losses"])
        assert_numbers_close(mine["weights"], theirs["weights"])
    # What each epoch logged was reduced over the ranks (sync_dist=True: NCCL's AVG of the loss and of Lightning's
    # int64 batch-size counter, a SUM; torchmetrics' states gathered): the same on both ranks, and the CPU run's.
    assert gpu[0]["logged"] == gpu[1]["logged"] and [sorted(epoch) for epoch in gpu[0]["logged"]] == [LOGGED] * 2
    assert gpu[0]["logged"][0]["val_seen"] == 24  # each rank validated 12 of the 24 samples
    assert_numbers_close(gpu[0]["logged"], cpu[0]["logged"])
    # DDP keeps the replicas identical. With ddp_spawn the module comes to the ranks from the parent in shared
    # memory: each rank's move to its GPU must copy it, or both ranks' optimizers step the same weights.
    assert gpu[0]["weights"] == gpu[1]["weights"]
