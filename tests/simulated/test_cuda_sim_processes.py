"""CUDA-written programs whose work runs in other processes under ``--target cuda-sim``, as on a machine with N GPUs:
DataLoader workers started with ``spawn``, ``mp.spawn`` and torchrun DDP ranks each on its own ``cuda:RANK``, the
card and its memory seen alike in every process, device tensors sent to other processes sharing their memory as
CUDA's IPC shares it, CUDA's refusals (DDP ranks on another GPU than their ``device_ids``, the GPU in a process forked
after it was used). What runs is compared with the same program on the cpu target."""

from __future__ import annotations

import json
import pickle
import re
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

import pytest
import torch
from dist_jobs import Finished, free_port, torchrun
from program_runs import PROGRAMS as PROCESS_PROGRAMS
from program_runs import json_lines, torchdevice_run
from torch.testing import assert_close

import torchdevice

PROGRAMS = Path(__file__).resolve().parent / "programs"
TARGETS = ("cpu", "cuda-sim")
LOADER, DDP_RANKS = PROGRAMS / "loader_train.py", PROGRAMS / "ddp_ranks.py"


def side_by_side(launch: Callable[[str], Finished]) -> dict[str, Finished]:
    """``launch(target)`` for the cpu target and cuda-sim at once; both must succeed."""
    with ThreadPoolExecutor(len(TARGETS)) as pool:
        runs = {target: pool.submit(launch, target) for target in TARGETS}
        done = {target: run.result() for target, run in runs.items()}
    for finished in done.values():
        assert finished.returncode == 0, finished.output
    return done


def run_on(target: str, *args: str) -> Finished:
    return torchdevice_run("--target", target, *args, env={"MASTER_PORT": str(free_port())})


def ddp_ranks(tmp_path: Path, launch: Callable[[str, Path], Finished]) -> tuple[list[dict], list[dict]]:
    """What each rank of ``ddp_ranks.py``, launched by ``launch(target, out_dir)``, wrote: (cuda-sim's, cpu's)."""
    side_by_side(lambda target: launch(target, tmp_path / target))
    gpu, cpu = ([json.loads(p.read_text()) for p in sorted((tmp_path / target).glob("rank*.json"))]
                for target in ("cuda-sim", "cpu"))
    return gpu, cpu


def same_states(gpu: list[dict], cpu: list[dict]) -> None:
    assert len(gpu) == len(cpu) == 2
    for mine, theirs in zip(gpu, cpu, strict=True):
        assert_close(torch.tensor(mine["loss_sum"]), torch.tensor(theirs["loss_sum"]))  # all-reduced on the device
        assert_close({k: torch.tensor(v) for k, v in mine["state"].items()},
                     {k: torch.tensor(v) for k, v in theirs["state"].items()})


@pytest.mark.processes
def test_dataloader_spawned_workers_feed_pinned_batches_to_the_gpu():
    steps = {t: json_lines(done) for t, done in side_by_side(lambda t: run_on(t, str(LOADER))).items()}
    assert len(steps["cuda-sim"]) == 8
    assert all(s["pinned"] and s["on"] == ["cuda:0"] * 3 for s in steps["cuda-sim"]), steps["cuda-sim"]
    # The same samples in the same order through the same CPU kernels: the cpu target's losses (float32's tolerance;
    # they are equal here, a batch moved wrong or lost changes them by ~1e-1).
    assert_close(torch.tensor([s["loss"] for s in steps["cuda-sim"]]), torch.tensor([s["loss"] for s in steps["cpu"]]))


@pytest.mark.processes
def test_mp_spawn_ddp_puts_each_rank_on_its_own_gpu(tmp_path):
    def launch(target: str, out: Path) -> Finished:
        out.mkdir()
        return run_on(target, "--devices", "2", str(DDP_RANKS), str(out))

    gpu, cpu = ddp_ranks(tmp_path, launch)
    assert [(r["rank"], r["current_device"], r["device_count"], r["backend"], r["seen"]) for r in gpu] == [
        (0, 0, 2, "nccl", ["cuda:0"]), (1, 1, 2, "nccl", ["cuda:1"])]
    assert [r["seen"] for r in cpu] == [["cpu"], ["cpu"]]
    # gloo all-reduces the gradients in the same order on both targets, over the same CPU kernels: each rank's state
    # is the cpu target's (float32's tolerance; equal here, a rank's half of the gradient lost moves it by ~1e-2).
    # DDP keeps the parameters identical across ranks (BatchNorm's running statistics are each rank's own: DDP
    # broadcasts rank 0's before each forward, which then updates them).
    same_states(gpu, cpu)
    assert all(gpu[0]["state"][name] == gpu[1]["state"][name] for name in ("0.weight", "1.weight", "3.weight"))


@pytest.mark.processes
def test_torchrun_ranks_use_cuda_local_rank(tmp_path):
    def launch(target: str, out: Path) -> Finished:
        out.mkdir()
        return torchrun(2, "--target", target, str(DDP_RANKS), str(out))

    gpu, cpu = ddp_ranks(tmp_path, launch)
    assert [(r["rank"], r["current_device"], r["device_count"], r["seen"]) for r in gpu] == [
        (0, 0, 2, ["cuda:0"]), (1, 1, 2, ["cuda:1"])]  # 2 devices: torchrun's processes per node
    same_states(gpu, cpu)


@pytest.mark.processes
def test_fsdp_ranks_shard_the_model_over_the_gpus_and_train_as_one_process(tmp_path):
    done = torchrun(2, "--target", "cuda-sim", str(PROGRAMS / "fsdp_ranks.py"), str(tmp_path))
    assert done.returncode == 0, done.output
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert [(r["rank"], r["seen"]) for r in ranks] == [(0, ["cuda:0"]), (1, ["cuda:1"])]
    # one process on the whole batch, plain torch: the gradient two halves average to
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for x in torch.randn(4, 16, 8, generator=torch.Generator().manual_seed(0)):
        torch.nn.functional.mse_loss(model(x), x.sum(-1, keepdim=True).sin()).backward()
        optimizer.step()
        optimizer.zero_grad()
    for rank in ranks:
        assert_close({k: torch.tensor(v) for k, v in rank["state"].items()},
                      {k: v.detach() for k, v in model.named_parameters()}, rtol=1e-5, atol=1e-6)


@pytest.mark.processes
def test_fsdp2_fully_shard_on_the_gpus_mesh_trains_as_one_process(tmp_path):
    done = torchrun(2, "--target", "cuda-sim", str(PROGRAMS / "fsdp2_ranks.py"), str(tmp_path))
    assert done.returncode == 0, done.output
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert [(r["rank"], r["seen"]) for r in ranks] == [(0, ["cuda:0"]), (1, ["cuda:1"])]
    # every parameter a DTensor of a "cuda" mesh (the blocks' the default one, the accelerator's), its shard on the GPU
    assert [r["shards"] for r in ranks] == [{name: ["cuda", f"cuda:{rank}"] for name in (
        "0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")} for rank in (0, 1)]
    # one process on the whole batch, plain torch: its losses the two halves' mean, the state_dict's DTensors gathered
    # its parameters (float32's tolerance; a rank's gradient lost or not averaged moves them by ~1e-3)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for x in torch.randn(4, 16, 8, generator=torch.Generator().manual_seed(0)):
        loss = torch.nn.functional.mse_loss(model(x), x.sum(-1, keepdim=True).sin())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert_close(torch.tensor([r["losses"] for r in ranks]).mean(0), torch.tensor(losses))
    for rank in ranks:
        assert_close({k: torch.tensor(v) for k, v in rank["state"].items()}, model.state_dict(), rtol=1e-5, atol=1e-6)


@pytest.mark.processes
def test_sync_batch_norm_ranks_normalize_with_the_whole_batch_as_one_process(tmp_path):
    done = torchrun(2, "--target", "cuda-sim", str(PROGRAMS / "syncbn_ranks.py"), str(tmp_path))
    assert done.returncode == 0, done.output
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert [(r["rank"], r["seen"], r["norms"]) for r in ranks] == [(0, ["cuda:0"], ["SyncBatchNorm"]),
                                                                   (1, ["cuda:1"], ["SyncBatchNorm"])]
    # one process, plain BatchNorm on the whole batch: its losses the two halves' mean, its parameters and running
    # statistics each rank's, its evaluation (the running statistics) each rank's half (float32's tolerance; a rank
    # normalized with its own half's statistics moves them by ~1e-2)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1, bias=False), torch.nn.BatchNorm2d(4),
                                torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 8, bias=False),
                                torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.randn(5, 16, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    losses = []
    for x in data[:4]:
        loss = torch.nn.functional.mse_loss(model(x), x.mean((1, 2, 3)).sin()[:, None])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        evaluated = model(data[4])
    assert_close(torch.tensor([r["losses"] for r in ranks]).mean(0), torch.tensor(losses))
    for rank in ranks:
        assert_close({k: torch.tensor(v) for k, v in rank["state"].items()}, model.state_dict(), rtol=1e-5, atol=1e-6)
        assert_close(torch.tensor(rank["eval"]), evaluated[rank["rank"]::2])


@pytest.mark.processes
def test_a_rank_whose_model_is_on_another_gpu_than_its_device_ids_fails_as_on_a_gpu():
    """No ``set_device``: every model on cuda:0, ``device_ids=[rank]``. DDP takes the GPU it is given (the cpu target,
    where every ``cuda:i`` is the CPU, runs it)."""
    done = run_on("cuda-sim", "--devices", "2", str(PROGRAMS / "ddp_forgot_set_device.py"))
    assert done.returncode != 0, done.output
    assert ("rank 1: Expected all tensors to be on the same device, but got mat1 is on cuda:1, different from other "
            "tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)" in done.stdout.splitlines()), \
        done.output

@pytest.mark.processes
@pytest.mark.skipif(sys.platform == "win32", reason="no fork on Windows")
def test_a_process_forked_after_the_gpu_was_used_cannot_use_it():
    """CUDA's rule for ``fork`` (the cpu target, where "cuda" is the CPU, runs the GPU's workers)."""
    (seen,) = json_lines(run_on("cuda-sim", str(PROGRAMS / "forked.py")))
    assert seen == {"forked_before": "cuda:0", "host_workers": [[[0.0, 0.0]], [[1.0, 1.0]]],
                    "gpu_workers": "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                                   "multiprocessing, you must use the 'spawn' start method"}

@pytest.mark.processes
def test_the_card_and_its_memory_reach_every_process():
    (seen,) = json_lines(run_on("cuda-sim", "--gpu", "A100-40GB", "--gpu-memory", "2GiB", str(PROGRAMS / "card.py")))
    assert seen["parent"] == seen["spawned"] == seen["subprocess"] == {
        "name": "NVIDIA A100-SXM4-40GB", "total": 2 * 1024**3, "count": 1}


@pytest.mark.processes
def test_device_tensors_sent_to_other_processes_share_their_memory():
    """A spawned process writes into a tensor of cuda:1 and a Parameter it was given and sends back one it made; a
    DataLoader worker returns a batch made on the GPU: the values are the cpu target's, the devices the GPU's."""
    seen = {t: json_lines(done)[0] for t, done in side_by_side(lambda t: run_on(t, "--devices", "2",
                                                                                str(PROGRAMS / "shared.py"))).items()}
    gpu, cpu = seen["cuda-sim"], seen["cpu"]
    assert gpu["child"] == {"t": "cuda:1", "p": ["Parameter", "cuda:0", True], "made": ["cuda:1", [7.0, 7.0]]}
    assert (gpu["t"], gpu["p"]) == (cpu["t"], cpu["p"]) == ([1.0, 1.0, 1.0], [2.0, 2.0])  # the child's writes
    assert gpu["batch"] == ["cuda:0", cpu["batch"][1]]


@pytest.mark.processes
def test_hogwild_workers_train_the_model_on_the_gpu():
    done = torchdevice_run("--target", "cuda-sim", str(PROCESS_PROGRAMS / "hogwild.py"), "spawn")
    assert done.returncode == 0, done.output
    assert "steps done [150, 150]" in done.stdout, done.output
    assert sorted(re.findall(r"worker (\d) on cuda:0: loss", done.stdout)) == ["0", "1"], done.output
    # Only the workers trained the model, so it is trained here only if they updated its memory: within 1e-3 of the
    # relation their data follow (the untrained model is ~8 off), as on the cpu target (tests/processes).
    assert float(re.search(r"weight error (\S+)", done.stdout).group(1)) < 1e-3, done.output


def test_a_device_tensor_pickled_for_another_process_is_its_memory():
    """The reduction ``torch.multiprocessing`` pickles with: the tensor received is the one sent (here, loaded in this
    process: writes through either are seen through the other); torch's own once uninstalled."""
    torch_reduction = ForkingPickler._extra_reducers[torch.Tensor]
    with torchdevice.installed("cuda-sim", devices=2):
        sent = torch.arange(4.0, device="cuda:1")[1:]
        received = pickle.loads(ForkingPickler.dumps(sent))
        assert (received.device, received.tolist()) == (torch.device("cuda", 1), [1.0, 2.0, 3.0])
        sent += 10
        received[0] = -1
        assert (sent.tolist(), received.tolist()) == ([-1.0, 12.0, 13.0], [-1.0, 12.0, 13.0])
        assert ForkingPickler.dumps(sent)  # sent again: already in shared memory
    assert ForkingPickler._extra_reducers[torch.Tensor] is torch_reduction


@pytest.mark.processes
def test_flex_attention_through_a_compiled_block_mask_computes_what_the_cpu_computes():
    """``create_block_mask`` compiles a graph that takes no tensor and makes the GPU's: it runs on the device."""
    done = side_by_side(lambda target: run_on(target, str(PROGRAMS / "block_masks.py")))
    (gpu,), (cpu,) = (json_lines(done[target]) for target in ("cuda-sim", "cpu"))
    assert gpu["device"] == "cuda:0" and gpu["blocks"] == cpu["blocks"]
    assert_close(torch.tensor(gpu["out"]), torch.tensor(cpu["out"]))
