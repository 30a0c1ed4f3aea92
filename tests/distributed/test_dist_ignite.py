"""pytorch-ignite's NCCL launcher under ``torchdevice run --devices 2``: real spawned ranks on gloo."""

from __future__ import annotations

import json
import sys

import pytest
from dist_jobs import PROGRAMS, run

pytestmark = pytest.mark.processes

pytest.importorskip("ignite", reason="pytorch-ignite is a test dependency (pip install -e '.[dev]')")


def test_ignite_parallel_nccl_two_ranks_agree():
    """``idist.Parallel(backend="nccl", nproc_per_node=2)`` starts (it asks ``is_nccl_available()`` first),
    each rank is told NCCL and its own CUDA device, and the collectives' results are the same on both."""
    result = run([sys.executable, "-m", "torchdevice", "run", "--devices", "2", str(PROGRAMS / "ignite_nccl.py")],
                 timeout=120)
    assert result.returncode == 0, result.output
    ranks = sorted((json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")),
                   key=lambda r: r["rank"])
    assert [(r["rank"], r["local_rank"], r["world"]) for r in ranks] == [(0, 0, 2), (1, 1, 2)], result.output
    told = [(r["backend"], r["device"], r["cuda_device"]) for r in ranks]
    assert told == [("nccl", "cuda:0", 0), ("nccl", "cuda:1", 1)]
    for rank in ranks:
        assert rank["summed"] == [3.0, 3.0, 3.0]
        assert rank["gathered"] == [0.0, 1.0]
        assert rank["objects"] == [{"rank": 0}, {"rank": 1}]
        assert rank["largest"] == [3, 7]
        assert rank["refused"] == "Cannot use ReduceOp.BAND with NCCL"  # as on NCCL; gloo would compute it
        # rank 1's tensor (twice the common draw) reached both ranks
        assert rank["chosen"] == pytest.approx([2 * w for w in ranks[1]["weights"]])
    assert ranks[0]["weights"] == ranks[1]["weights"]
