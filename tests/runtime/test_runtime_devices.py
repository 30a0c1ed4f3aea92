"""Every way a CUDA device enters PyTorch lands on the target (here the CPU)."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

import torchdevice

CUDA_FORMS = ["cuda", "cuda:0", "cuda:1", torch.device("cuda"), torch.device("cuda", 1), 0, 1]


@pytest.fixture
def two_devices():
    """Two emulated CUDA devices on the CPU, so that every form above names one."""
    with torchdevice.installed("cpu", devices=2) as device:
        yield device


@pytest.mark.parametrize("device", CUDA_FORMS, ids=repr)
def test_factories_like_and_new_take_every_cuda_form(two_devices, device):
    base = torch.ones(2, 3)
    made = [
        torch.zeros(2, device=device), torch.randn(2, 3, device=device), torch.arange(4, device=device),
        torch.tensor([1.0], device=device), torch.full((2,), 7.0, device=device), torch.eye(2, device=device),
        torch.empty_like(base, device=device), torch.rand_like(base, device=device),
        base.new_zeros(3, device=device), base.new_tensor([1, 2], device=device), base.new_full((2,), 1, device=device),
    ]
    assert {t.device for t in made} == {torch.device("cpu")}


@pytest.mark.parametrize("device", CUDA_FORMS, ids=repr)
def test_tensor_and_module_moves(two_devices, device):
    x = torch.randn(3)
    moved = x.to(device)
    assert moved is not x and moved.equal(x)  # host to device: a copy, as on CUDA
    assert moved.to(device) is moved  # already there: no copy
    assert x.to(device, torch.float64).dtype == torch.float64
    assert x.to(device=device, non_blocking=True).untyped_storage() is not x.untyped_storage()
    model = nn.Linear(2, 2).to(device)
    assert next(model.parameters()).device.type == "cpu"
    assert nn.Linear(2, 2, device=device).weight.device.type == "cpu"


def test_positional_device_arguments(on_cpu):
    assert nn.Linear(2, 2).to(0, torch.float64).weight.dtype == torch.float64
    assert torch.randn(2).to(torch.float16).dtype == torch.float16
    other = torch.zeros(2, dtype=torch.int32)
    assert torch.randn(2).to(other).dtype == torch.int32


def test_sizes_stay_sizes_where_an_overload_takes_ints(on_cpu):
    assert torch.ones(1).new_ones(2, 3, 4).shape == (2, 3, 4)
    assert torch.ones(1).new_ones(2, 3, 4, device="cuda").shape == (2, 3, 4)


def test_cuda_methods(on_cpu):
    x = torch.randn(2)
    d = x.cuda()
    assert d is not x and d.equal(x) and d.cuda() is d and d.cuda(0, non_blocking=True) is d
    assert d.is_cuda and not x.is_cuda  # the program sees its CUDA tensors as CUDA tensors, and only those
    model = nn.Linear(2, 2).cuda()
    assert next(model.parameters()).device.type == "cpu"
    storage = x.untyped_storage().cuda()
    assert storage.device.type == "cpu" and storage is not x.untyped_storage() and storage.cuda() is storage


def test_pinned_memory_on_a_target_without_it(on_cpu):
    x = torch.randn(4)
    pinned = x.pin_memory()
    assert pinned is not x and pinned.equal(x) and pinned.is_pinned() and not x.is_pinned()
    assert pinned.pin_memory() is pinned and pinned.cpu() is pinned
    assert torch.empty(4, pin_memory=True).shape == (4,)
    assert torch.zeros(4, device="cuda", pin_memory=True).device.type == "cpu"
    assert pinned.to("cuda", non_blocking=True).equal(x)
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        torch.zeros(2, device="cuda").pin_memory()


def test_default_device_forms(on_cpu):
    with torch.device("cuda"):
        assert torch.zeros(1).device.type == "cpu"
    torch.set_default_device("cuda")
    try:
        assert torch.ones(1).device.type == "cpu"
    finally:
        torch.set_default_device(None)


def test_generator_stream_and_event_classes(on_cpu):
    generator = torch.Generator(device="cuda").manual_seed(1)
    assert isinstance(generator, torch.Generator) and generator.device.type == "cpu"
    assert isinstance(torch.default_generator, torch.Generator)
    assert torch.randn(3, generator=generator, device="cuda").equal(
        torch.randn(3, generator=torch.Generator().manual_seed(1)))
    stream = torch.Stream("cuda")
    assert isinstance(stream, torch.Stream) and stream.device.type == "cpu"
    start, end = torch.Event("cuda", enable_timing=True), torch.Event(device="cuda", enable_timing=True)
    start.record()
    time.sleep(0.02)
    end.record()
    assert 20 <= start.elapsed_time(end) < 2000  # milliseconds, with what ran between the records


def test_autocast_and_grad_scaler_take_cuda(on_cpu):
    model = nn.Linear(4, 4)
    x = torch.randn(2, 4, device="cuda")
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        on_target = model(x)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        native = model(x)
    assert on_target.dtype == torch.bfloat16 and on_target.equal(native)
    with torch.amp.autocast("cuda"):  # no dtype: the target's autocast dtype, as autocast("cpu") has
        assert model(x).dtype == torch.get_autocast_dtype("cpu")
    with torch.cuda.amp.autocast():  # CUDA's deprecated spelling: the same default
        assert model(x).dtype == torch.get_autocast_dtype("cpu")
    with torch.cuda.amp.autocast(dtype=torch.float16):
        assert model(x).dtype == torch.float16
    assert isinstance(torch.cuda.amp.autocast(), torch.autocast)
    assert torch.is_autocast_enabled("cuda") is False
    scaler = torch.amp.GradScaler("cuda")
    assert scaler.is_enabled() and scaler.get_scale() == torch.amp.GradScaler("cpu").get_scale()  # as on the CPU


def test_dataloader_pin_memory_device_warns_as_on_a_gpu_machine(on_cpu):
    data = torch.utils.data.TensorDataset(torch.arange(8.0))
    with pytest.warns(UserWarning, match="pin_memory_device is deprecated"):  # torch 2.13 says so on CUDA too
        batches = [b for (b,) in torch.utils.data.DataLoader(data, batch_size=4, pin_memory=True,
                                                             pin_memory_device="cuda")]
    assert torch.cat(batches).equal(torch.arange(8.0)) and all(b.is_pinned() for b in batches)


def test_bad_arguments_get_torchs_own_errors(on_cpu):
    with pytest.raises(RuntimeError, match="Invalid device string: 'cuda:x'"):
        torch.zeros(1, device="cuda:x")
    with pytest.raises(TypeError, match="device"):
        torch.zeros(1, device=[0])


def test_redirects_are_counted_per_op(on_cpu):
    for _ in range(3):
        torch.zeros(1, device="cuda")
    torch.ones(1).to("cuda")
    torch.zeros(1, device="cpu")  # not a redirect
    redirects = torchdevice.report()["redirects"]
    assert redirects["torch.zeros"] == {"cuda->cpu": 3}
    assert redirects["torch.Tensor.to"] == {"cuda->cpu": 1}
    torch.zeros(1, device="cuda")
    assert torchdevice.report()["redirects"]["torch.zeros"] == {"cuda->cpu": 4}


def test_legacy_cuda_tensor_types(on_cpu):
    FloatTensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor  # the old idiom
    x = FloatTensor([1.0, 2.0])
    assert x.device == torch.device("cpu") and x.dtype == torch.float32
    assert isinstance(x, torch.cuda.FloatTensor) and not isinstance(x, torch.cuda.HalfTensor)
    assert not isinstance(torch.ones(2), torch.cuda.FloatTensor)  # a host tensor, as on a GPU
    assert torch.cuda.LongTensor(2, 3).shape == (2, 3) and torch.cuda.LongTensor(2, 3).dtype == torch.int64
    half = x.type(torch.cuda.HalfTensor)
    assert half.dtype == torch.float16 and half.equal(x.half())
    assert x.type("torch.cuda.DoubleTensor").equal(x.double())
    assert x.type(torch.int64).dtype == torch.int64 and x.type() == "torch.cuda.FloatTensor"
    assert torch.ones(2).type() == "torch.FloatTensor"
    assert torchdevice.report()["redirects"]["torch.Tensor.type"] == {"cuda->cpu": 2}
