"""``torchdevice catalog show`` in a real process: an overload's CUDA kernel, present or missing, and the
determinism alerts of CUDA's kernels, from the generated table."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes


def show(name: str) -> dict[str, list[str]]:
    done = subprocess.run([sys.executable, "-m", "torchdevice", "catalog", "show", name], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, value = line[:14].strip(), line[15:]
        rows.setdefault(key, []).append(value)
    return rows


def test_an_overload_shows_its_cuda_kernel_and_alerts():
    rows = show("torch.ops.aten.scatter_reduce.two")
    assert rows["cuda"] == ["kernel present (native)"]
    assert rows["cuda alert"] == ["'scatter_reduce_cuda_prod_' when reduce is 'prod' and index is not empty "
                                  "(ATen/native/cuda/ScatterGatherKernel.cu scatter_reduce_two_cuda_kernel)"]
    rows = show("torch.ops.aten.histogram.bin_ct")
    assert rows["cuda"] == ["kernel missing: a GPU refuses it (the CPU has a native kernel)"]
    assert "cuda alert" not in rows


def test_a_function_shows_the_alerts_of_the_overloads_it_reaches():
    rows = show("torch.nn.functional.max_unpool2d")
    assert rows["cuda alert"] == [
        f"aten::max_unpool2d{suffix}: 'max_unpooling2d_forward_out' always "
        "(ATen/native/cuda/MaxUnpooling.cu max_unpooling2d_forward_out_cuda)" for suffix in ("", ".out")]
    assert "cuda alert" not in show("torch.add")
