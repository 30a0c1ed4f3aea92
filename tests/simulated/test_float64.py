"""float64 on the simulated Mac: what a CUDA program puts in float64 on "cuda" works, with the CPU's values,
and is reported as fallbacks; the program's own mistakes still raise torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from fallback_support import Fallbacks

import torchdevice


def float64_work() -> dict[str, object]:
    """What CUDA programs do with float64 on the device."""
    data = np.linspace(-1.0, 1.0, 12).reshape(4, 3)  # float64, as numpy makes it
    X = torch.from_numpy(data).to("cuda")
    ones = torch.ones(4, 1, dtype=torch.float64, device="cuda")
    design = torch.cat([X, ones], 1)
    y = (X @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64, device="cuda")).unsqueeze(1) + 0.25
    fit = torch.linalg.lstsq(design, y).solution
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1).cuda()
    mixed = model(X.float()) - y  # float32 output, float64 target: promoted
    loss = mixed.pow(2).mean()
    loss.backward()
    doubled = torch.arange(3, device="cuda").double()
    return {"X": (X.dtype, X.device.type), "fit": fit.cpu(), "mixed": (mixed.dtype, mixed.device.type),
            "loss": loss.item(), "grad": model.weight.grad.cpu(), "doubled": doubled.tolist(),
            "doubled_dtype": doubled.dtype, "printed": str(fit[-1])}


def test_float64_on_the_device_gives_the_cpus_results():
    with torchdevice.installed("cpu"):
        native = float64_work()
    fallbacks = Fallbacks()
    with torchdevice.installed("mps-sim"):
        mac = float64_work()
    assert mac["X"] == (torch.float64, "mps") and native["X"] == (torch.float64, "cpu")
    assert mac["mixed"] == (torch.float64, "mps")
    assert mac["doubled"] == [0.0, 1.0, 2.0] and mac["doubled_dtype"] == torch.float64
    # the same CPU kernels compute both in float64; only the float32 model output differs by rounding order
    torch.testing.assert_close(mac["fit"], native["fit"], rtol=1e-12, atol=1e-12)
    assert mac["loss"] == pytest.approx(native["loss"], rel=1e-6)
    torch.testing.assert_close(mac["grad"], native["grad"], rtol=1e-6, atol=1e-7)
    assert mac["printed"] == native["printed"].replace("], dtype", "], device='mps:0', dtype")
    assert fallbacks["aten::linalg_lstsq", "cpu"] == 1  # MPS has no float64: reported


def test_user_errors_with_float64_stay_torchs_errors():
    with torchdevice.installed("mps-sim"):
        a = torch.ones(2, 3, dtype=torch.float64, device="cuda")
        with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 2x3\)"):
            a @ a
        with pytest.raises(RuntimeError, match="same device"):
            a + torch.ones(2, 3, dtype=torch.float64)
