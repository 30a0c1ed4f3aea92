"""The distributed patches in one process: backend spellings, real single-rank groups, DDP, undo."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TypeVar

import pytest
import torch
import torch.distributed as dist
from dist_jobs import free_port
from torch.nn.parallel import DistributedDataParallel

import torchdevice
import torchdevice.distributed as td
from torchdevice.device.target import for_name
from torchdevice.distributed import groups
from torchdevice.distributed.groups import NCCL_DEFAULT_TIMEOUT, gloo_backend
from torchdevice.patching import Patcher

T = TypeVar("T")

needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present: NCCL needs no translation")


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ("nccl", "gloo"),
        ("NCCL", "gloo"),
        (dist.Backend.NCCL, "gloo"),
        ("cuda:nccl,cpu:gloo", "cpu:gloo"),
        ("cpu:gloo,cuda:nccl", "cpu:gloo"),
        ("cuda:nccl", "cpu:gloo"),
        ("cpu:mpi, cuda:nccl", "cpu:mpi"),
        ("gloo", "gloo"),
        ("cpu:gloo", "cpu:gloo"),
        (None, None),
    ],
)
def test_backend_spellings(asked, expected):
    assert gloo_backend(asked) == expected


@pytest.fixture
def patched() -> Iterator[Patcher]:
    patcher = Patcher()
    td.activate(patcher, for_name("cpu"), {"devices": 2})
    try:
        yield patcher
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        patcher.restore()


@pytest.fixture
def hold() -> Iterator[Callable[[T], T]]:
    """Keeps the DDP models a test makes until gloo's loop thread is done with their collectives.

    Dropping the last reference to a process group while that thread still releases a finished
    collective deadlocks in torch 2.13 (the group's destructor waits for the thread, the thread for
    the GIL): models are released after the same settling pause the runtime takes at exit."""
    held: list[object] = []

    def keep(obj: T) -> T:
        held.append(obj)
        return obj

    yield keep
    time.sleep(groups.SETTLE_SECONDS)
    held.clear()


def real_backend(group: dist.ProcessGroup | None = None) -> str:
    """The backend the group really has, as torch recorded it (what torch's own code is told)."""
    return dist.distributed_c10d._world.pg_map[group or dist.distributed_c10d._get_default_group()][0]


def world_timeout(group: dist.ProcessGroup | None = None) -> timedelta:
    return (group or dist.distributed_c10d._get_default_group())._get_backend(torch.device("cpu")).options._timeout


@pytest.mark.parametrize(
    ("call", "backend", "answers"),
    [
        (lambda **kw: dist.init_process_group("nccl", **kw), "gloo", ("nccl", "cuda:nccl")),
        (lambda **kw: dist.init_process_group(backend="nccl", **kw), "gloo", ("nccl", "cuda:nccl")),
        (lambda **kw: dist.init_process_group(backend="cuda:nccl,cpu:gloo", **kw), "cpu:gloo",
         ("cuda:nccl,cpu:gloo", "cuda:nccl,cpu:gloo")),
        (lambda **kw: dist.init_process_group(**kw), "gloo", ("undefined", "cuda:nccl")),
        (lambda **kw: dist.init_process_group(device_id=torch.device("cuda", 0), **kw), "gloo", ("nccl", "cuda:nccl")),
        (lambda **kw: dist.init_process_group("nccl", device_id=0, **kw), "gloo", ("nccl", "cuda:nccl")),
    ],
    ids=["positional", "keyword", "device-map", "no backend", "device_id", "int device_id"],
)
def test_init_process_group_creates_gloo_group_with_nccl_default_timeout(patched, call, backend, answers):
    """The group is gloo's; the program is told what CUDA's torch tells it for the same call."""
    call(store=dist.HashStore(), world_size=1, rank=0)
    assert real_backend() == backend
    assert (dist.get_backend(), dist.get_backend_config()) == answers
    assert world_timeout() == NCCL_DEFAULT_TIMEOUT
    t = torch.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [1.0, 1.0, 1.0]


def test_user_timeout_init_method_rank_and_world_size_are_kept(patched):
    dist.init_process_group("nccl", f"tcp://127.0.0.1:{free_port()}", timedelta(seconds=42), 1, 0)
    assert (dist.get_world_size(), dist.get_rank(), world_timeout()) == (1, 0, timedelta(seconds=42))


def test_new_group_maps_nccl_and_keeps_gloo_requests(patched):
    dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0)
    nccl = dist.new_group(backend="nccl", timeout=timedelta(seconds=9))
    mapped = dist.new_group(backend="cuda:nccl,cpu:gloo")
    gloo = dist.new_group(backend="gloo")
    inherited = dist.new_group()
    assert (real_backend(nccl), world_timeout(nccl)) == ("gloo", timedelta(seconds=9))
    assert (real_backend(mapped), world_timeout(mapped)) == ("cpu:gloo", NCCL_DEFAULT_TIMEOUT)
    assert (real_backend(inherited), world_timeout(inherited)) == ("gloo", NCCL_DEFAULT_TIMEOUT)
    assert world_timeout(gloo) == dist.default_pg_timeout
    answers = [dist.get_backend(g) for g in (nccl, mapped, gloo, inherited)]
    assert answers == ["nccl", "cuda:nccl,cpu:gloo", "gloo", "nccl"]
    assert [g.name() for g in (nccl, gloo, inherited)] == ["nccl", "gloo", "nccl"]


def test_nccl_is_available_and_torch_code_is_told_the_truth(patched):
    """The program sees NCCL; torch's own code, which picks devices and options from the answer, sees gloo."""
    assert dist.is_nccl_available() and dist.is_backend_available("nccl")
    assert dist.is_backend_available("cuda:nccl,cpu:gloo")
    dist.init_process_group(dist.Backend.NCCL, store=dist.HashStore(), world_size=1, rank=0)
    group = dist.distributed_c10d._get_default_group()
    assert dist.get_backend() == dist.Backend.NCCL and dist.get_backend(group) == "nccl" and group.name() == "nccl"
    assert dist.distributed_c10d._get_object_coll_device() == "cpu"  # what gloo serves
    gathered: list[object] = [None]
    dist.all_gather_object(gathered, {"rank": 0})
    assert gathered == [{"rank": 0}]
    destroyed = dist.new_group(backend="nccl")
    dist.destroy_process_group(destroyed)
    with pytest.raises(ValueError, match="not initialized"):  # torch's own checks and errors stay
        dist.get_backend(destroyed)


def test_the_answers_are_restored(patched):
    dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0)
    patched.restore()
    assert dist.get_backend() == "gloo" and dist.distributed_c10d._get_default_group().name() == "gloo"
    assert dist.is_nccl_available() is torch.distributed.distributed_c10d._NCCL_AVAILABLE


@needs_no_cuda
@pytest.mark.filterwarnings("ignore:Attempted to get default timeout for nccl")
def test_nccl_fails_here_without_the_patches():
    with pytest.raises((RuntimeError, ValueError)):
        dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0)
    assert not dist.is_initialized()


@pytest.mark.parametrize(
    ("device_ids", "output_device"),
    [([0], 0), ([1], 1), ([torch.device("cuda", 0)], torch.device("cuda", 0)), (["cuda:1"], "cuda:1"), ([0], None)],
)
def test_ddp_accepts_cuda_device_ids_for_a_cpu_module(patched, hold, device_ids, output_device):
    dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0)
    model = hold(DistributedDataParallel(torch.nn.Linear(2, 1), device_ids=device_ids, output_device=output_device))
    assert (model.device_ids, model.output_device) == (None, None)
    model(torch.ones(3, 2)).sum().backward()


@pytest.mark.parametrize("device_ids", [[2], ["cuda:2"], [torch.device("cuda", 5)]])
def test_ddp_device_ids_beyond_the_emulated_devices_raise_cudas_error(patched, device_ids):
    dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0)
    with pytest.raises(torch.AcceleratorError, match="invalid device ordinal"):
        DistributedDataParallel(torch.nn.Linear(2, 1), device_ids=device_ids)


def test_ddp_rejects_cuda_device_ids_for_a_cpu_module_without_the_patches():
    dist.init_process_group("gloo", store=dist.HashStore(), world_size=1, rank=0)
    try:
        with pytest.raises(ValueError, match="device_ids"):
            DistributedDataParallel(torch.nn.Linear(2, 1), device_ids=[1], output_device=1)
    finally:
        dist.destroy_process_group()


def test_restore_puts_back_every_original():
    def patchable() -> list[object]:
        c10d = dist.distributed_c10d
        return [
            dist.init_process_group,
            dist.new_group,
            c10d.init_process_group,
            c10d.new_group,
            vars(DistributedDataParallel)["__init__"],
        ]

    originals = patchable()
    patcher = Patcher()
    td.activate(patcher, for_name("cpu"), {})
    assert all(now is not before for now, before in zip(patchable(), originals, strict=True))
    patcher.restore()
    assert all(now is before for now, before in zip(patchable(), originals, strict=True))


def test_mps_target_stages_collectives_until_restored_each_time():
    def staged() -> bool:
        return torch._C._dispatch_has_kernel_for_dispatch_key("c10d::allreduce_", "MPS")

    for _ in range(2):
        assert not staged()
        patcher = Patcher()
        td.activate(patcher, for_name("mps"), {})
        assert staged()
        patcher.restore()
    assert not staged()


def test_ddp_program_lines_under_the_runtime(hold):
    original = dist.init_process_group
    with torchdevice.installed("cpu"):
        torch.cuda.set_device(0)
        dist.init_process_group("nccl", store=dist.HashStore(), world_size=1, rank=0)
        try:
            model = hold(DistributedDataParallel(torch.nn.Linear(2, 1).cuda(), device_ids=[0], output_device=0))
            loss = model(torch.ones(3, 2, device="cuda:0")).sum()
            loss.backward()
            logged = loss.detach().clone()
            dist.all_reduce(logged)
            assert logged.device == torch.device("cpu") and dist.get_backend() == "nccl" and real_backend() == "gloo"
        finally:
            dist.destroy_process_group()
    assert dist.init_process_group is original
