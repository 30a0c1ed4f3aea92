"""Checkpoints written on a CUDA machine load on the target, whatever map_location says."""

from __future__ import annotations

import io

import pytest
import torch
import torch.serialization

import torchdevice


@pytest.fixture(scope="module")
def cuda_checkpoint() -> bytes:
    """A checkpoint whose storages are tagged ``cuda:0``, as ``torch.save`` writes them on a GPU."""
    registry = torch.serialization._package_registry
    before = list(registry)
    torch.serialization.register_package(0, lambda storage: "cuda:0", lambda obj, location: None)
    try:
        buffer = io.BytesIO()
        torch.save({"weight": torch.arange(4.0), "step": 7}, buffer)
    finally:
        registry[:] = before
    return buffer.getvalue()


def test_the_checkpoint_is_a_cuda_one(cuda_checkpoint):
    with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
        torch.load(io.BytesIO(cuda_checkpoint))


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("map_location", [
    None, "cuda", "cuda:0", torch.device("cuda", 0), {"cuda:0": "cuda"},
    lambda storage, location: storage.cuda(), lambda storage, location: None, "cpu",
], ids=["none", "str", "str-index", "device", "dict", "callable-cuda", "callable-none", "cpu"])
def test_every_map_location_form_lands_on_the_target(on_cpu, cuda_checkpoint, map_location, weights_only):
    state = torch.load(io.BytesIO(cuda_checkpoint), map_location=map_location, weights_only=weights_only)
    assert state["step"] == 7
    assert state["weight"].device.type == "cpu" and state["weight"].equal(torch.arange(4.0))


def test_a_device_the_machine_lacks_raises_what_cuda_raises(on_cpu, cuda_checkpoint):
    with pytest.raises(RuntimeError, match="on CUDA device 1 but torch.cuda.device_count.. is 1"):
        torch.load(io.BytesIO(cuda_checkpoint), map_location={"cuda:0": "cuda:1"})


def test_checkpoint_redirects_are_counted(on_cpu, cuda_checkpoint):
    torch.load(io.BytesIO(cuda_checkpoint))
    assert torchdevice.report()["redirects"]["torch.load"] == {"cuda->cpu": 1}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_archives_load_with_map_location_cuda(on_cpu):
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), buffer)
    buffer.seek(0)
    module = torch.jit.load(buffer, map_location="cuda")
    assert module.weight.device.type == "cpu"
