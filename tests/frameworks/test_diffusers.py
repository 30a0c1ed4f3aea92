"""diffusers: a UNet trained with AdamW and an EMA, then sampled on the GPU and with both CPU offloads
(accelerate's hooks), under the runtime on the CPU, the simulated Mac and the simulated GPU, against the program
on the CPU natively."""

from __future__ import annotations

import pytest
from framework_runs import assert_numbers_close

pytestmark = pytest.mark.processes

PROGRAM = "diffusers_train.py"
OFFLOADS = ("enable_model_cpu_offload", "enable_sequential_cpu_offload")


@pytest.mark.parametrize("target", ["cpu", "mps-sim", "cuda-sim"])
def test_training_and_offloaded_sampling_give_the_cpu_numbers(native, redirected, target):
    (cpu,) = native(PROGRAM, "--cpu")
    (gpu,) = redirected(PROGRAM, target=target)
    assert gpu["device"] == {"cpu": "cpu", "mps-sim": "mps:0", "cuda-sim": "cuda:0"}[target]
    assert_numbers_close(gpu["losses"], cpu["losses"])
    # Four AdamW steps normalise each gradient: where attention is computed by other kernels (the simulated Mac's
    # are torch's math decomposition, the CPU's a fused kernel), float32 rounding of near-zero gradients moves a
    # parameter by up to the learning rate.
    assert_numbers_close(gpu["trained"], cpu["trained"], rtol=1e-3, atol=1e-4)
    assert_numbers_close(gpu["ema"], cpu["ema"], rtol=1e-3, atol=1e-4)
    for sampled in ("samples", *OFFLOADS):
        assert_numbers_close(gpu[sampled], cpu["samples"], rtol=1e-4, atol=1e-4)
