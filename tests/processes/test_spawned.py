"""Programs whose work runs in spawned processes (macOS's default start method) and forkserver children:
``mp.spawn`` DDP ranks, hogwild workers, DataLoader workers. Each runs through ``torchdevice run`` and is
compared with the same program written for the CPU."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch
from dist_jobs import free_port
from program_runs import json_lines, python, torchdevice_run

pytestmark = pytest.mark.processes


@pytest.mark.release
def test_mp_spawn_ddp_on_nccl_runs_one_rank_per_emulated_device(tmp_path):
    env = {"TORCHDEVICE_DEVICES": "2", "MASTER_PORT": str(free_port())}
    done = torchdevice_run("ddp_spawn.py", str(tmp_path), env=env)
    assert done.returncode == 0, done.output
    ranks = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("rank*.json"))]
    (single,) = json_lines(python("train_cpu.py"))
    assert [(r["rank"], r["current_device"], r["device_count"], r["on"]) for r in ranks] == [
        (0, 0, 2, "cpu"), (1, 1, 2, "cpu")]  # world_size = torch.cuda.device_count(); set_device(rank) held
    # DDP keeps replicas identical: both ranks apply the same all-reduced gradients to the same parameters.
    assert ranks[0]["params"] == ranks[1]["params"]
    # Each rank's loss is the mean over its half of the batch and DDP averages the two gradients, which is
    # the gradient of the mean over the whole batch: the CPU program's single process. Only the order of
    # the float32 sums differs, a few ulps per step over 5 steps: rtol 1e-5 is ample and still far below
    # the effect of losing a rank's half (which changes the parameters by ~1e-2).
    for got, expected in zip(ranks[0]["params"], single["params"], strict=True):
        torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["spawn", pytest.param("forkserver", marks=pytest.mark.skipif(
    sys.platform == "win32", reason="no forkserver on Windows"))])
def test_hogwild_workers_train_the_shared_model(method):
    runs = {"cuda": torchdevice_run("hogwild.py", method), "cpu": python("hogwild_cpu.py", method)}
    for written_for, done in runs.items():
        assert done.returncode == 0, done.output
        assert "exit codes [0, 0]" in done.stdout, (written_for, done.output)
        assert "steps done [150, 150]" in done.stdout, (written_for, done.output)  # each worker really trained
        assert sorted(re.findall(r"worker (\d) on cpu: loss", done.stdout)) == ["0", "1"], done.output
        # The data of both workers follow one noise-free linear relation, which SGD recovers whatever the
        # interleaving of their lock-free updates (which differs run to run): the weights end within 1e-3
        # of it (the untrained model is ~8 off), for the CUDA-written program as for the CPU-written one.
        error = float(re.search(r"weight error (\S+)", done.stdout).group(1))
        assert error < 1e-3, (written_for, done.output)


def test_dataloader_workers_started_with_spawn_use_the_cuda_api():
    batches = json_lines(torchdevice_run("loader.py"))
    expected = json_lines(python("loader_cpu.py"))
    assert [b["device"] for b in batches] == ["cpu"] * 4
    # Every sample is drawn by the same generator (the CPU's, which CUDA's is on this target) from the same
    # seed in the same order, so the values are identical, not merely close.
    assert [b["values"] for b in batches] == [b["values"] for b in expected]
