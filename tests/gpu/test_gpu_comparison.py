"""The prepared GPU comparison (``compare_with_gpu.py``) runs every probe under cuda-sim on any machine, and its
answers are what a GPU answers where docs/targets/cuda-sim.md says so (here, without a GPU, torch's CUDA sources are the
reference for the expected answers below)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("compare_with_gpu.py")
SAME_DEVICE = ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 "
               "and cpu!")
"""TensorIterator's words, for an op whose CUDA kernel's wrapper checks no device (``device_check: NoCheck``)."""


def wrapper_check(argument: str, on: str, others: str, wrapper: str) -> str:
    """The words of a CUDA kernel wrapper's device check (c10's ``common_device_check_failure``)."""
    return (f"RuntimeError: Expected all tensors to be on the same device, but got {argument} is on {on}, different "
            f"from other tensors on {others} (when checking argument in method {wrapper})")


@pytest.mark.processes
def test_every_probe_runs_under_cuda_sim_and_answers_as_a_gpu():
    done = subprocess.run([sys.executable, str(SCRIPT), "--sim-only"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)
    assert answers["device"] == "device(type='cuda', index=0)" and answers["is_cuda"] == "True"
    placement = {"stack with cpu": wrapper_check("tensors", "cuda:0", "cpu", "wrapper_CUDA_cat"),
                 "cpu batch": wrapper_check("mat1", "cpu", "cuda:0", "wrapper_CUDA_addmm"),
                 "cpu target": SAME_DEVICE,
                 "cpu indices": wrapper_check("index", "cpu", "cuda:0", "wrapper_CUDA__index_select"),
                 "cpu condition": SAME_DEVICE, "in place from cpu": SAME_DEVICE,
                 "cat": wrapper_check("tensors", "cpu", "cuda:0", "wrapper_CUDA_cat"),
                 "matmul": wrapper_check("mat2", "cpu", "cuda:0", "wrapper_CUDA_mm")}
    for line, words in placement.items():
        assert answers[line] == words, line
    assert answers["cpu index"] == "[0.0, 2.0]" and answers["cpu scalar"] == "device(type='cuda', index=0)"
    assert (answers["allocated 1000 floats"], answers["allocated 1 byte"]) == ("4096", "512")
    assert answers["out of memory"].startswith("OutOfMemoryError: CUDA out of memory. Tried to allocate 4096.00 GiB.")
    assert answers["invalid ordinal"] == "AcceleratorError: CUDA error: invalid device ordinal"
    assert answers["deterministic pooling backward"].startswith(
        "RuntimeError: adaptive_avg_pool2d_backward_cuda does not have a deterministic implementation")
    assert answers["capture then item"].endswith("operation not permitted when stream is capturing")
    # Normalization.cu: float32 statistics of half-precision inputs, its InvStd (0 for a variance and eps of 0), ranks
    # merged by their counts (means 2.5 and 3.5, variances 1.1875 and 2.5), only the outputs asked for
    assert answers["batch_norm_stats of half"] == ("[(torch.float32, [4.5, 5.5, 6.5]), "
                                                   "(torch.float32, [0.2981, 0.2981, 0.2981])]")
    assert answers["batch_norm_stats of a constant, eps 0"] == "[0.0]"
    assert answers["batch_norm_stats of Long"] == "RuntimeError: \"batch_norm_stats_cuda\" not implemented for 'Long'"
    assert answers["batch_norm_gather_stats_with_counts"] == "[[2.5, 3.5], [0.9177, 0.6325]]"
    assert answers["batch_norm_elemt of half"] == "torch.float16"
    assert answers["batch_norm_backward_reduce, bias only"] == "[True, True, True, False]"
    assert answers["cudnn"] == "(True, True, 10)"
    assert answers["host gradient"] == ("RuntimeError: attempting to assign a gradient with device type 'cpu' to a "
                                        "tensor with device type 'cuda'. Please ensure that the gradient and the "
                                        "tensor are on the same device")
    assert answers["backward with a host gradient"] == ("RuntimeError: invalid gradient at index 0 - expected device "
                                                        "cuda:0 but got cpu")
    assert answers["lengths on the gpu"] == ("RuntimeError: 'lengths' argument should be a 1D CPU int64 tensor, but "
                                             "got 1D cuda:0 Long tensor")
