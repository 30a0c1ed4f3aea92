"""skorch's ``NeuralNetClassifier(device="cuda")`` under the runtime (on the CPU and on the simulated GPU) against
``device="cpu"`` natively."""

from __future__ import annotations

import pytest
from framework_runs import assert_numbers_close

pytestmark = pytest.mark.processes

PROGRAM = "skorch_fit.py"


@pytest.mark.parametrize("target", ["cpu", "cuda-sim"])
def test_classifier_on_cuda_has_the_cpu_history(native, redirected, target):
    (cpu,) = native(PROGRAM, "--device", "cpu")
    (gpu,) = redirected(PROGRAM, target=target)
    if target == "cuda-sim":
        assert gpu["on"] == "cuda:0"  # the module's parameters are the GPU's
    assert len(gpu["history"]) == 4 and gpu["history"][-1]["train_loss"] < gpu["history"][0]["train_loss"]
    assert_numbers_close(gpu["history"], cpu["history"])
    assert_numbers_close(gpu["probabilities"], cpu["probabilities"])
