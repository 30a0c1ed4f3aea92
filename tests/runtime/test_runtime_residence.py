"""CUDA's semantics of where tensors live, on the CPU target: what a program can observe matches a GPU."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

import torchdevice


@pytest.fixture
def two_devices():
    with torchdevice.installed("cpu", devices=2) as device:
        yield device


def test_a_host_to_device_move_is_a_copy(on_cpu):
    a = torch.ones(3)
    for move in (lambda t: t.to("cuda"), lambda t: t.cuda(), lambda t: t.to("cuda", non_blocking=True),
                 lambda t: t.to(torch.device("cuda", 0)), lambda t: t.to(device="cuda"), lambda t: t.to(0)):
        b = move(a)
        b += 1
        assert a.equal(torch.ones(3)) and b.equal(torch.full((3,), 2.0))


def test_a_move_to_where_a_tensor_is_returns_it(two_devices):
    c = torch.zeros(3, device="cuda:1")
    assert c.to("cuda:1") is c and c.cuda(1) is c and c.to(c) is c
    other = c.to("cuda:0")  # another device: a copy, as between two GPUs
    assert other is not c and other.get_device() == 0 and c.get_device() == 1
    assert c.to("cuda:1", torch.float64).dtype == torch.float64


def test_one_staging_buffer_for_every_batch(on_cpu):
    batches = [torch.full((2,), float(i)) for i in range(4)]
    buf = torch.empty(2).pin_memory()
    on_device = []
    for batch in batches:
        buf.copy_(batch)
        on_device.append(buf.to("cuda", non_blocking=True))
    assert [t.tolist() for t in on_device] == [b.tolist() for b in batches]


def test_initial_weights_saved_before_model_cuda_survive_training(on_cpu):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    init = {k: v for k, v in model.state_dict().items()}
    snapshot = {k: v.clone() for k, v in init.items()}
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model(torch.randn(8, 4, device="cuda")).pow(2).sum().backward()
    optimizer.step()
    assert all(init[k].equal(snapshot[k]) for k in init)
    assert not model.weight.detach().equal(init["weight"])


def test_module_moves_twice_without_copying_again(on_cpu):
    model = nn.Linear(2, 2).cuda()
    storage = model.weight.untyped_storage()
    model.to("cuda")
    model.cuda()
    assert model.weight.untyped_storage() is storage


def test_device_to_host_moves_copy(on_cpu):
    d = torch.randn(4, device="cuda")
    kept = d.clone()
    for move in (lambda t: t.cpu(), lambda t: t.to("cpu"), lambda t: t.detach().cpu(), lambda t: t.to(device="cpu")):
        host = move(d)
        host.zero_()
        assert d.equal(kept)
    array = d.detach().cpu().numpy()
    array[array < 0] = 0  # post-processing in place
    assert d.equal(kept)


def test_model_outputs_copied_to_host_are_their_own(on_cpu):
    model = nn.Linear(3, 3).cuda()
    out = model(torch.randn(2, 3).cuda())
    kept = out.detach().clone()
    array = out.detach().cpu().numpy()
    array[:] = 0
    assert out.detach().equal(kept)


def test_model_parameters_copied_to_host_are_their_own(on_cpu):
    model = nn.Linear(3, 3).cuda()
    kept = model.weight.detach().clone()
    state = {k: v.cpu() for k, v in model.state_dict().items()}
    state["weight"].zero_()
    assert model.weight.detach().equal(kept)


def test_a_host_parameter_moved_to_the_host_is_itself(on_cpu):
    # accelerate rebuilds offloaded weights as nn.Parameter(value).to("cpu") and reads their class back
    p = nn.Parameter(torch.ones(2))
    assert p.to("cpu") is p and p.cpu() is p
    d = nn.Parameter(torch.ones(2, device="cuda"))
    assert d.cpu() is not d and d.to("cpu") is not d  # a parameter on the device: a copy, as on a GPU


def test_pin_memory_copies_and_is_pinned(on_cpu):
    x = torch.randn(3)
    pinned = x.pin_memory()
    assert pinned is not x and pinned.is_pinned() and not x.is_pinned()
    pinned.zero_()
    assert not x.eq(0).all()


def test_what_a_tensor_says_of_its_device(two_devices):
    host = torch.zeros(3)
    assert not host.is_cuda and host.is_cpu and host.get_device() == -1 and host.type() == "torch.FloatTensor"
    d = host.to("cuda:1")
    assert d.is_cuda and not d.is_cpu and d.get_device() == 1 and d.type() == "torch.cuda.FloatTensor"
    assert torch.ones(2, dtype=torch.int64, device="cuda").type() == "torch.cuda.LongTensor"
    assert d.cpu().get_device() == -1 and not d.cpu().is_cuda
    with torch.cuda.device_of(d):
        assert torch.cuda.current_device() == 1
    assert torch._C.TensorBase.is_cuda.__get__(d) is False  # torch's own code sees the machine


def test_tensors_made_like_a_device_tensor_are_device_tensors(two_devices):
    d = torch.ones(2, device="cuda:1")
    for made in (d.new_zeros(3), d.new_tensor([1.0]), torch.zeros_like(d), torch.rand_like(d), torch.full_like(d, 2)):
        assert made.is_cuda and made.get_device() == 1
    assert not torch.zeros_like(torch.ones(2)).is_cuda


def test_deep_copies_of_device_tensors_and_modules_live_on_the_device(two_devices):
    model = torch.nn.Linear(2, 2).to("cuda:1")
    copied = copy.deepcopy(model)
    assert [p.get_device() for p in copied.parameters()] == [1, 1]
    assert copied.weight.data_ptr() != model.weight.data_ptr()
    assert copy.deepcopy(torch.ones(3, device="cuda")).is_cuda and not copy.deepcopy(torch.ones(3)).is_cuda
    layers = torch.nn.Transformer(8, 2, 1, 1, 16, device="cuda").state_dict().values()  # clones its layers
    assert all(t.is_cuda for t in layers)


def test_device_contexts_work_with_the_wrapped_factories(on_cpu):
    with torch.device("meta"):
        assert torch.empty(1).device.type == "meta"
        assert torch.zeros(2, 3).is_meta
        assert torch.get_default_device().type == "meta"
        assert nn.Linear(4, 4).weight.is_meta
    torch.set_default_device("cuda")
    try:
        made = torch.zeros(2)
        assert made.is_cuda and made.device.type == "cpu"
        assert torch.get_default_device() == torch.device("cuda", 0)
        with torch.device("meta"):
            assert torch.get_default_device().type == "meta"
    finally:
        torch.set_default_device(None)
    assert not torch.zeros(2).is_cuda and torch.get_default_device().type == "cpu"


def test_device_context_of_a_library_built_before_install():
    torch.utils._device._device_constructors()  # filled with the originals
    with torchdevice.installed("cpu"), torch.device("meta"):
        assert torch.ones(3).is_meta


def test_memory_allocated_follows_live_device_tensors(two_devices):
    base = torch.cuda.memory_allocated()
    x = torch.empty(1024, device="cuda")
    assert torch.cuda.memory_allocated() == base + 4096
    assert torch.cuda.memory_allocated(1) == 0
    y = x.view(32, 32)  # a view holds no memory of its own
    del x
    assert torch.cuda.memory_allocated() == base + 4096
    del y
    assert torch.cuda.memory_allocated() == base
    assert torch.cuda.max_memory_allocated() >= base + 4096
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated() == base
    host = torch.empty(1024)
    assert torch.cuda.memory_allocated() == base
    del host


def test_the_cuda_generator_is_not_the_host_generator(on_cpu):
    torch.manual_seed(0)
    expected = torch.rand(4)
    torch.manual_seed(0)
    torch.cuda.manual_seed(123)
    torch.randn(8, device="cuda")
    assert torch.rand(4).equal(expected)  # seeding and drawing on "cuda" left the host stream alone


def test_manual_seed_seeds_both_and_states_restore_separately(two_devices):
    torch.manual_seed(7)
    assert torch.cuda.initial_seed() == 7
    first = torch.randn(3, device="cuda:1")
    torch.manual_seed(7)
    assert torch.randn(3, device="cuda:1").equal(first)
    host_state, cuda_state = torch.get_rng_state(), torch.cuda.get_rng_state()
    expected = (torch.rand(2), torch.rand(2, device="cuda"))
    torch.set_rng_state(host_state)
    torch.cuda.set_rng_state(cuda_state)
    assert torch.rand(2).equal(expected[0]) and torch.rand(2, device="cuda").equal(expected[1])
    assert len(torch.cuda.default_generators) == 2


def test_resume_from_saved_states_reproduces(on_cpu):
    def train(steps: int, start: dict | None = None) -> tuple[list[float], dict]:
        model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).cuda()
        if start is None:
            torch.manual_seed(0)
        else:
            model.load_state_dict(start["model"])
            torch.set_rng_state(start["cpu"])
            torch.cuda.set_rng_state(start["cuda"])
        losses = []
        for _ in range(steps):
            x = torch.randn(2, 4, device="cuda")
            losses.append(model(x).sum().item())
        return losses, {"model": model.state_dict(), "cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state()}

    torch.manual_seed(0)
    model_seed = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).state_dict()
    whole, _ = train(4, {"model": model_seed, "cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state()})
    torch.manual_seed(0)
    model_seed = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).state_dict()
    head, saved = train(2, {"model": model_seed, "cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state()})
    tail, _ = train(2, saved)
    assert head + tail == pytest.approx(whole)


def test_as_tensor_copies_host_memory_to_the_device(on_cpu):
    array = np.ones(3)
    t = torch.as_tensor(array, device="cuda")
    t += 1
    assert array.tolist() == [1.0, 1.0, 1.0] and t.is_cuda
    d = torch.ones(2, device="cuda")
    assert torch.as_tensor(d, device="cuda") is d
    host = torch.ones(2)
    assert torch.as_tensor(host, device="cuda") is not host


def test_checkpoints_load_onto_the_device(on_cpu, tmp_path):
    path = tmp_path / "ckpt.pt"
    torch.save({"w": torch.arange(4.0)}, path)
    loaded = torch.load(path, map_location="cuda")
    assert loaded["w"].is_cuda and loaded["w"].equal(torch.arange(4.0))
    moved = torch.load(path, map_location=lambda storage, location: storage.cuda())
    assert moved["w"].is_cuda


def test_uninstall_leaves_tensors_as_torch_sees_them():
    with torchdevice.installed("cpu"):
        d = torch.zeros(2, device="cuda")
    assert not d.is_cuda and d.get_device() == -1 and d.cpu() is d


@pytest.mark.filterwarnings("error")  # no "pin_memory ... no accelerator" warning: the accelerator is emulated
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.processes
def test_dataloader_pins_its_batches(on_cpu, workers):
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, pin_memory=True, num_workers=workers)
    batches = [batch for (batch,) in loader]
    assert loader.pin_memory and all(b.is_pinned() for b in batches)
    assert torch.cat(batches).equal(torch.arange(8.0))
