"""A project's own tests, written the way timm's are: the device comes from ``TORCH_DEVICE``.

Each result on that device is compared with the same computation on the CPU.
"""

import os

import pytest
import torch
import torch.nn.functional as F

DEVICE = torch.device(os.environ.get("TORCH_DEVICE", "cpu"))


@pytest.mark.parametrize("kernel", [1, 2, 3])
@pytest.mark.parametrize("pool", [F.max_pool2d, F.avg_pool2d, F.lp_pool2d], ids=lambda f: f.__name__)
def test_pooling(pool, kernel):
    torch.manual_seed(kernel)
    x = torch.rand(2, 3, 9, 9)
    args = (2.0, kernel) if pool is F.lp_pool2d else (kernel,)
    out = pool(x.to(DEVICE), *args)
    assert out.device.type == torch.empty(0, device=DEVICE).device.type
    torch.testing.assert_close(out.cpu(), pool(x, *args))


def test_the_device_is_there():
    if DEVICE.type == "cuda":
        assert torch.cuda.is_available() and torch.cuda.device_count() >= 1
