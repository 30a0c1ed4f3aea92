"""A simulated device is its profile: a third one, registered by a test, runs through the same machinery as the Mac's
and the GPU's, with nothing of it changed. Here a GPU-like device that says it is ``xpu``, lacks ``cumsum`` and
float64, and turns on one feature (cuDNN's and NCCL's answers)."""

from __future__ import annotations

import sys
from multiprocessing.reduction import ForkingPickler

import pytest
import torch

from torchdevice import simulated
from torchdevice.patching import Patcher
from torchdevice.reporting import fit
from torchdevice.simulated import profile
from torchdevice.simulated.profile import Profile

NO_FLOAT64 = "XPU has no float64 here"
XPU = Profile("xpu-sim", "xpu", "XPU", missing=frozenset({"cumsum"}), no_float64=NO_FLOAT64,
              features=("libraries",))


@pytest.fixture
def xpu(monkeypatch):
    """The made-up device registered and activated; the patcher it was activated with."""
    monkeypatch.setitem(profile.PROFILES, XPU.target, lambda devices, gpu: XPU)
    patcher = Patcher()
    try:
        yield simulated.activate(patcher, XPU.target), patcher
    finally:
        patcher.restore()


def test_the_target_is_the_profiles(xpu):
    target, _ = xpu
    assert target.name == "xpu-sim" and target.backend == "XPU" and target.shown == torch.device("xpu", 0)
    assert target.hosting is None and target.own is None and not target.missing and not target.aliases
    assert profile.active() is XPU


def test_its_tensors_say_its_type(xpu):
    target, _ = xpu
    x = torch.arange(3.0).to(target.device)
    assert x.device == torch.device("xpu", 0) and not x.is_mps
    assert x.untyped_storage().device == torch.device("xpu", 0)


def test_the_op_it_lacks_raises_the_dispatchers_error_naming_its_backend(xpu):
    target, _ = xpu
    x = torch.randn(5).to(target.device)
    for call in (lambda: torch.cumsum(x, 0), lambda: torch.cumsum(x, 0, out=torch.empty_like(x))):
        with pytest.raises(NotImplementedError, match=r"^Could not run 'aten::cumsum(\.out)?' with arguments from "
                                                      r"the 'XPU' backend\."):
            call()


def test_float64_raises_its_own_words(xpu):
    target, _ = xpu
    with pytest.raises(TypeError) as allocated:
        torch.ones(2, dtype=torch.float64, device=target.device)
    with pytest.raises(TypeError) as converted:
        torch.ones(2, device=target.device).to(torch.float64)
    with pytest.raises(TypeError) as summed:
        torch.ones(2, device=target.device).sum(dtype=torch.float64)
    assert str(allocated.value) == str(converted.value) == str(summed.value) == NO_FLOAT64


def test_what_it_has_computes_the_cpus_values(xpu):
    target, _ = xpu
    a, b = torch.randn(4, 6), torch.randn(6, 3)
    got = torch.softmax(a.to(target.device) @ b.to(target.device), dim=1)
    torch.testing.assert_close(got.cpu(), torch.softmax(a @ b, dim=1))  # float32's tolerances
    n = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    assert torch.equal((n.to(target.device) * 3 - 1).sum(0).cpu(), (n * 3 - 1).sum(0))
    h = torch.randn(8, dtype=torch.float16)
    torch.testing.assert_close(h.to(target.device).exp().cpu(), h.exp())  # float16's tolerances


def test_the_features_it_does_not_list_are_not_on(monkeypatch):
    monkeypatch.setitem(profile.PROFILES, XPU.target, lambda devices, gpu: XPU)
    sources, reducer = list(fit.SOURCES), ForkingPickler._extra_reducers[torch.Tensor]  # type: ignore[attr-defined]
    patcher = Patcher()
    try:
        simulated.activate(patcher, XPU.target)
        replaced = {(owner, name) for owner, name, _ in patcher.replaced}
        cudnn = sys.modules["torch.backends.cudnn"].m
        assert (cudnn, "is_available") in replaced and torch.backends.cudnn.is_available()  # the one it lists
        assert (torch._C, "_cuda_memorySnapshot") not in replaced  # memory_tools
        assert (torch._C, "_get_accelerator") not in replaced  # parallel
        assert (torch.backends.mps, "is_available") not in replaced  # not a Mac: no macOS version
        assert ForkingPickler._extra_reducers[torch.Tensor] is reducer  # sharing
        assert fit.SOURCES == sources  # fit
        deepspeed = "deepspeed.accelerator.cuda_accelerator"  # deepspeed_gpu: its CUDA accelerator, now or on import
        assert not any(getattr(hook, "name", None) == deepspeed for hook in sys.meta_path)
        assert all(name != "get_op_builder" for _, name in replaced)
    finally:
        patcher.restore()


def test_an_unknown_target_is_refused():
    with pytest.raises(ValueError, match="no simulated target 'npu-sim'"):
        simulated.activate(Patcher(), "npu-sim")
