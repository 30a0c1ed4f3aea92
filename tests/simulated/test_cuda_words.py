"""The simulated GPU refuses a CUDA program's placement bugs in CUDA's words: the device check of the CUDA kernel's
wrapper (``wrapper_CUDA_mm``: the op's arguments in its order, the first tensor's device the one the others must be
on), a convolution's own check of its input's and parameters' types (cuDNN's on the device, oneDNN's on the host),
and TensorIterator's where the kernel has no wrapper check. The expected texts are what torch's CUDA build raises
(c10's ``common_device_check_failure``, ``Convolution.cpp``); the wrappers and their arguments are scanned from the
installed torch's ``native_functions.yaml`` by torchgen (``catalog/scanned/cuda_device_checks.yaml``), and, where
this torch is a CUDA build, checked against its ``libtorch_cuda.so``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torchdevice_generated.cuda_kernels_table import DEVICE_CHECKS

import torchdevice


def wrapper_check(argument: str, on: str, others: str, wrapper: str) -> str:
    return (f"Expected all tensors to be on the same device, but got {argument} is on {on}, different from other "
            f"tensors on {others} (when checking argument in method {wrapper})")


ITERATOR = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"


@pytest.fixture
def gpu():
    with torchdevice.installed("cuda-sim") as device:
        yield device


class ConvNet(torch.nn.Module):
    """A public repository's bug: the convolutions in a plain list, which ``.cuda()`` does not move."""

    def __init__(self) -> None:
        super().__init__()
        self.convs = [torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(8, 8, 3)]
        self.head = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = F.relu(conv(x))
        return self.head(x.mean((2, 3)))


def test_placement_bugs_raise_what_a_gpu_raises(gpu):
    model = torch.nn.Linear(4, 2).cuda()
    x, host = torch.randn(5, 4, device="cuda"), torch.randn(5, 4)
    images = torch.randn(2, 3, 16, 16, device="cuda")
    expected = {
        "the batch left on the host": (lambda: model(host),
                                       wrapper_check("mat1", "cpu", "cuda:0", "wrapper_CUDA_addmm")),
        "the labels left on the host": (lambda: F.cross_entropy(model(x), torch.tensor([0, 1, 1, 0, 1])),
                                        wrapper_check("target", "cpu", "cuda:0", "wrapper_CUDA_nll_loss_forward")),
        "a host matrix": (lambda: torch.mm(x, torch.randn(4, 3)),
                          wrapper_check("mat2", "cpu", "cuda:0", "wrapper_CUDA_mm")),
        "host indices into an embedding": (lambda: torch.nn.Embedding(10, 3).cuda()(torch.tensor([1, 2])),
                                           wrapper_check("index", "cpu", "cuda:0", "wrapper_CUDA__index_select")),
        "device indices into a host embedding": (lambda: torch.nn.Embedding(10, 3)(torch.tensor([1], device="cuda")),
                                                 wrapper_check("index", "cuda:0", "cpu", "wrapper_CUDA__index_select")),
        "cat": (lambda: torch.cat([x, host]), wrapper_check("tensors", "cpu", "cuda:0", "wrapper_CUDA_cat")),
        "convolutions in a plain list": (lambda: ConvNet().cuda()(images),
                                         "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) "
                                         "should be the same"),
        "host images into a model on the device": (
            lambda: torch.nn.Conv2d(3, 8, 3).cuda()(images.cpu()),
            "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same or input "
            "should be a MKLDNN tensor and weight is a dense tensor"),
        "a half weight": (lambda: F.conv2d(images, torch.randn(8, 3, 3, 3, device="cuda").half()),
                          "Input type (torch.cuda.FloatTensor) and weight type (torch.cuda.HalfTensor) should be the "
                          "same"),
        "a host bias": (lambda: F.conv_transpose2d(images, torch.randn(3, 8, 3, 3, device="cuda"), torch.randn(8)),
                        "Input type (torch.cuda.FloatTensor) and bias type (torch.FloatTensor) should be the same"),
        "a host condition": (lambda: torch.where(host > 0, x, 0.0), ITERATOR),  # TensorIterator's: no wrapper check
        "in place": (lambda: x.add_(host), ITERATOR),
        "a host scalar where the wrapper checks": (lambda: torch.addmm(torch.tensor(1.0), x, x.T),
                                                   wrapper_check("mat1", "cuda:0", "cpu", "wrapper_CUDA_addmm")),
    }
    for line, (run, words) in expected.items():
        with pytest.raises(RuntimeError) as raised:
            run()
            pytest.fail(line)
        assert str(raised.value).splitlines()[0] == words, line
    assert (x * torch.tensor(2.0)).is_cuda  # a 0-dim host tensor is TensorIterator's scalar
    assert F.conv2d(images, torch.randn(8, 3, 3, 3, device="cuda")).is_cuda


def test_two_gpus_are_told_apart_by_the_wrappers_check():
    with torchdevice.installed("cuda-sim", devices=2):
        a, b = torch.randn(3, 3, device="cuda:0"), torch.randn(3, 3, device="cuda:1")
        with pytest.raises(RuntimeError) as raised:
            a @ b
        assert str(raised.value).splitlines()[0] == wrapper_check("mat2", "cuda:1", "cuda:0", "wrapper_CUDA_mm")
        conv = torch.nn.Conv2d(3, 4, 3).to("cuda:1")  # the same type, another GPU: cuDNN's wrapper says which
        with pytest.raises(RuntimeError) as raised:
            conv(torch.randn(1, 3, 8, 8, device="cuda:0"))
        assert str(raised.value).splitlines()[0] == wrapper_check("weight", "cuda:1", "cuda:0",
                                                                   "wrapper_CUDA__cudnn_convolution")


def test_type_strings_are_cudas(gpu):
    x = torch.ones(2, device="cuda")
    assert (x.type(), x.half().type(), torch.ones(2).type()) == (
        "torch.cuda.FloatTensor", "torch.cuda.HalfTensor", "torch.FloatTensor")


def test_the_scanned_wrappers_are_the_cuda_builds():
    """Every wrapper of the table is a symbol of the installed torch's CUDA library, where it is a CUDA build."""
    library = Path(torch.__file__).parent / "lib" / "libtorch_cuda.so"
    if not library.exists():
        pytest.skip("this torch is not a CUDA build (the release tier runs PyPI's)")
    symbols = library.read_bytes()
    wrappers = {wrapper for wrapper, _ in DEVICE_CHECKS.values()}
    absent = [w for w in sorted(wrappers) if f"{len(w)}{w}".encode() not in symbols]  # as the mangled names hold it
    assert len(wrappers) > 500 and not absent
