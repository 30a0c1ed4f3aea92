"""N emulated CUDA devices: counted, selected per thread, each the target; one beyond them raises CUDA's error."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import torchdevice

ORDINAL = "CUDA error: invalid device ordinal"


@pytest.fixture
def three():
    with torchdevice.installed("cpu", devices=3) as device:
        yield device


def test_count_and_selection(three):
    assert torch.cuda.device_count() == 3 and torch.cuda.current_device() == 0
    torch.cuda.set_device(2)
    assert torch.cuda.current_device() == 2
    with torch.cuda.device("cuda:1"):
        assert torch.cuda.current_device() == 1
    assert torch.cuda.current_device() == 2
    torch.cuda.set_device(-1)  # a negative index changes nothing, as with CUDA
    assert torch.cuda.current_device() == 2
    assert len(torch.cuda.get_rng_state_all()) == 3


def test_the_current_device_belongs_to_the_thread(three):
    torch.cuda.set_device(1)
    seen = []
    thread = threading.Thread(target=lambda: (seen.append(torch.cuda.current_device()), torch.cuda.set_device(2)))
    thread.start()
    thread.join()
    assert seen == [0] and torch.cuda.current_device() == 1


@pytest.mark.parametrize("index", [0, 1, 2])
def test_every_emulated_device_is_the_target(three, index):
    assert torch.zeros(1, device=f"cuda:{index}").device.type == "cpu"
    assert torch.ones(1).cuda(index).device.type == "cpu"
    assert nn.Linear(2, 2).to(torch.device("cuda", index)).weight.device.type == "cpu"
    assert torch.cuda.get_device_name(index) == torch.cuda.get_device_name()


@pytest.mark.parametrize("use", [
    lambda: torch.zeros(1, device="cuda:3"),
    lambda: torch.ones(1).to(torch.device("cuda", 7)),
    lambda: torch.ones(1).cuda(3),
    lambda: nn.Linear(2, 2).cuda(3),
    lambda: torch.cuda.set_device(3),
    lambda: torch.cuda.device(3),
    lambda: torch.cuda.synchronize("cuda:3"),
    lambda: torch.cuda.memory_allocated(3),
], ids=["factory", "to", "tensor.cuda", "module.cuda", "set_device", "device", "synchronize", "memory"])
def test_an_index_beyond_the_emulated_devices_raises_cudas_error(three, use):
    with pytest.raises(torch.AcceleratorError, match=ORDINAL) as raised:
        use()
    assert "torchdevice emulates 3 CUDA devices" in str(raised.value) and "TORCHDEVICE_DEVICES" in str(raised.value)
    assert torch.cuda.current_device() == 0  # nothing changed


def test_device_queries_beyond_the_emulated_devices_assert_as_cuda_does(three):
    for query in (torch.cuda.get_device_properties, torch.cuda.get_device_name, torch.cuda.get_device_capability):
        with pytest.raises(AssertionError, match="Invalid device id"):
            query(3)


def test_one_device_by_default(on_cpu):
    assert torch.cuda.device_count() == 1
    with pytest.raises(torch.AcceleratorError, match=ORDINAL):
        torch.zeros(1, device="cuda:1")


def test_the_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("TORCHDEVICE_DEVICES", "2")
    with torchdevice.installed("cpu"):
        assert torch.cuda.device_count() == 2
    monkeypatch.delenv("TORCHDEVICE_DEVICES")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")  # under torchrun: a device for each process of the node
    with torchdevice.installed("cpu"):
        assert torch.cuda.device_count() == 4


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5"])
def test_a_bad_count_in_the_environment_is_warned_about_and_one_device_emulated(monkeypatch, value):
    monkeypatch.setenv("TORCHDEVICE_DEVICES", value)
    with pytest.warns(UserWarning, match=f"TORCHDEVICE_DEVICES={value!r} is not a positive whole number"):
        torchdevice.install("cpu")
    try:
        assert torch.cuda.device_count() == 1
    finally:
        torchdevice.uninstall()


@pytest.mark.parametrize("value", [0, -2, 1.5, True])
def test_a_bad_count_given_to_install_is_an_error(value):
    with pytest.raises(ValueError, match="devices must be a positive whole number"):
        torchdevice.install("cpu", devices=value)
    assert torchdevice.target() == torch.device("cuda")  # not installed
