"""accelerate's ``find_executable_batch_size`` on the simulated GPU: CUDA's out-of-memory error at the card's capacity
makes it retry smaller batches (``int(batch_size * 0.9)`` each time, accelerate's default) until one fits, as on that
GPU; the cpu target has no such bound."""

from __future__ import annotations

import pytest
from framework_runs import assert_numbers_close

pytestmark = pytest.mark.processes

PROGRAM = "accelerate_batch_size.py"
MiB, GiB = 2**20, 2**30
T4 = 15095 * MiB
"""A Tesla T4's memory as CUDA reports it (``torch.cuda.get_device_properties(0).total_memory``: 15,095 MiB)."""
CACHE_PER_SEQUENCE = 32 * 2 * 32 * 4096 * 128 * 2
"""The program's static key/value cache, bytes per sequence (2 GiB)."""


def retried(record: dict, capacity: str) -> None:
    """The finder's sizes from the start, each after an out-of-memory error that states the device's capacity."""
    sizes = [record["tried"][0]]
    while len(sizes) < len(record["tried"]):
        sizes.append(int(sizes[-1] * 0.9))
    assert record["tried"] == sizes and record["ran"] == sizes[-1]
    assert len(record["refused"]) == len(sizes) - 1 > 0
    for message in record["refused"]:
        assert message.startswith("CUDA out of memory. Tried to allocate ")
        assert f"GPU 0 has a total capacity of {capacity} of which " in message
    assert record["peak"] <= record["total_memory"]


def test_training_batch_shrinks_until_it_fits_the_memory_given(redirected):
    gpu = redirected(PROGRAM, "--start", "1024", target="cuda-sim", gpu_memory="4MiB")[0]
    retried(gpu, "4.00 MiB")
    assert gpu["total_memory"] == 4 * MiB
    # The run that fitted trains as the same batch does on the CPU target, where it runs at once.
    cpu = redirected(PROGRAM, "--start", str(gpu["ran"]))[0]
    assert (cpu["tried"], cpu["refused"], cpu["ran"]) == ([gpu["ran"]], [], gpu["ran"])
    assert_numbers_close(gpu["losses"], cpu["losses"])


def test_static_cache_batch_fits_a_t4(redirected):
    """Real sizes on the default card: a 7B model's cache for 16 sequences (32 GiB) shrinks to what a T4 holds."""
    gpu = redirected(PROGRAM, "--start", "16", "--generate", target="cuda-sim", gpu="T4")[0]
    retried(gpu, "14.74 GiB")
    assert gpu["total_memory"] == T4
    assert gpu["ran"] * CACHE_PER_SEQUENCE <= T4 < gpu["tried"][-2] * CACHE_PER_SEQUENCE
    assert gpu["peak"] == gpu["ran"] * CACHE_PER_SEQUENCE
