"""skorch's ``NeuralNetClassifier(device="cuda")`` under the runtime against ``device="cpu"`` natively."""

from __future__ import annotations

import pytest
from framework_runs import assert_numbers_close

pytestmark = pytest.mark.processes

PROGRAM = "skorch_fit.py"


def test_classifier_on_cuda_has_the_cpu_history(native, redirected):
    (cpu,) = native(PROGRAM, "--device", "cpu")
    (gpu,) = redirected(PROGRAM)
    assert len(gpu["history"]) == 4 and gpu["history"][-1]["train_loss"] < gpu["history"][0]["train_loss"]
    assert_numbers_close(gpu["history"], cpu["history"])
    assert_numbers_close(gpu["probabilities"], cpu["probabilities"])
