"""The simulated GPU's memory is CUDA's caching allocator's (``c10/cuda/CUDACachingAllocator.cpp``): each expectation
below follows from that source's rules (requests rounded to 512 bytes; up to 1 MiB packed in 2 MiB segments of the
small pool; up to 10 MiB splitting a 20 MiB segment; larger ones a segment of their own rounded to 2 MiB; a block
split where more than 1 MiB would remain; free blocks reused best-fit; cached segments given back and the allocation
retried before CUDA's out-of-memory error), read through the answers programs and torch's own tools read."""

from __future__ import annotations

import inspect
import pickle

import pytest
import torch

import torchdevice

MIB = 1 << 20


@pytest.fixture
def card():
    """A T4, its allocator's cache given back first (a new installation's, whatever earlier tests left)."""
    with torchdevice.installed("cuda-sim") as device:
        yield device


def stats() -> dict[str, int]:
    return torch.cuda.memory_stats()


def test_three_sizes_reserve_what_cudas_allocator_reserves(card):
    before = stats()
    kept = [torch.empty(n, device="cuda") for n in (10, 300_000, 30_000_000)]  # 40 B, 1.2 MB, 120 MB
    after = stats()
    assert torch.cuda.memory_allocated() - before["allocated_bytes.all.current"] == 512 + 1_200_128 + 120_000_000
    assert torch.cuda.memory_reserved() - before["reserved_bytes.all.current"] == 2 * MIB + 20 * MIB + 116 * MIB
    assert after["segment.small_pool.current"] - before["segment.small_pool.current"] == 1
    assert after["segment.large_pool.current"] - before["segment.large_pool.current"] == 2
    # the 20 MiB segment is split (18.9 MiB left) and so is the 116 MiB one (1.56 MiB left, more than 1 MiB)
    assert after["inactive_split.large_pool.current"] - before["inactive_split.large_pool.current"] == 2
    assert after["requested_bytes.all.current"] - before["requested_bytes.all.current"] == 40 + 1_200_000 + 120_000_000
    del kept


def test_small_tensors_share_a_segment_and_freed_blocks_are_reused(card):
    before = stats()
    small = [torch.empty(256, device="cuda") for _ in range(100)]  # 1 KiB each: one 2 MiB segment holds them
    assert stats()["segment.small_pool.current"] - before["segment.small_pool.current"] <= 1
    assert torch.cuda.memory_reserved() - before["reserved_bytes.all.current"] <= 2 * MIB
    assert stats()["allocation.small_pool.current"] - before["allocation.small_pool.current"] == 100
    big = torch.empty(5 * MIB // 4, device="cuda")  # 5 MiB: a 20 MiB segment, split
    made = stats()["num_device_alloc"]
    del big
    again = torch.empty(5 * MIB // 4, device="cuda")  # the freed block, merged back, serves it: no new segment
    assert stats()["num_device_alloc"] == made
    del small, again


def test_empty_cache_gives_back_whole_free_segments_only(card):
    torch.cuda.empty_cache()
    held = torch.empty(300_000, device="cuda")  # in a 20 MiB segment it shares with the next one
    freed = torch.empty(300_000, device="cuda")
    alone = torch.empty(25 * MIB // 4, device="cuda")  # 25 MiB: more than that segment has left; one of 26 MiB
    reserved = torch.cuda.memory_reserved()
    del freed, alone
    torch.cuda.empty_cache()
    assert reserved - torch.cuda.memory_reserved() == 26 * MIB  # that one; the shared one stays
    assert stats()["num_device_free"] >= 1
    del held


def test_before_failing_the_cache_is_given_back_and_the_allocation_retried(card):
    torch.cuda.empty_cache()
    free = torch.cuda.get_device_properties(0).total_memory - torch.cuda.memory_reserved()
    chunks = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda") for _ in range(free // (1 << 30) - 1)]
    del chunks  # all cached: reserved, not allocated
    retries = stats()["num_alloc_retries"]
    big = torch.empty(free - (1 << 30), dtype=torch.uint8, device="cuda")  # fits once the cache is given back
    assert stats()["num_alloc_retries"] == retries + 1
    del big


def test_the_out_of_memory_error_is_cudas_with_cudas_numbers(card):
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    held = torch.empty(total - torch.cuda.memory_reserved() - 30 * MIB, dtype=torch.uint8, device="cuda")
    with_held = torch.cuda.memory_reserved()
    ooms = stats()["num_ooms"]
    with pytest.raises(torch.cuda.OutOfMemoryError) as caught:
        torch.empty(15 * MIB, dtype=torch.uint8, device="cuda")  # 16 MiB: fits, and is cached once freed
        torch.empty(40 * MIB, dtype=torch.uint8, device="cuda")  # more than is free with the cache given back
    message = str(caught.value)
    reserved = torch.cuda.memory_reserved()  # the cache given back before failing: what the message counts
    assert reserved == with_held
    assert message.startswith("CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total capacity of "
                              f"{total / (1 << 30):.2f} GiB of which {(total - reserved) / MIB:.2f} MiB is free.")
    assert f"this process has {reserved / (1 << 30):.2f} GiB memory in use." in message
    assert message.endswith("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
                            "documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/"
                            "cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)")
    assert stats()["num_ooms"] == ooms + 1
    del held


def test_a_memory_fraction_bounds_what_the_process_may_reserve(card):
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(0.25)
    try:
        with pytest.raises(torch.cuda.OutOfMemoryError, match=r" allowed; Of the allocated memory "):
            torch.empty(total // 2, dtype=torch.uint8, device="cuda")
        fits = torch.empty(total // 8, dtype=torch.uint8, device="cuda")
        del fits
        with pytest.raises(TypeError, match="^Invalid type for fraction argument, must be `float`$"):
            torch.cuda.set_per_process_memory_fraction(1)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)


def test_max_split_size_keeps_large_segments_whole(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64")
    with torchdevice.installed("cuda-sim"):
        assert stats()["max_split_size"] == 64 * MIB
        big = torch.empty(100 * MIB // 4, device="cuda")
        assert stats()["oversize_segments.current"] == 1 and stats()["oversize_allocations.current"] == 1
        del big
        made = stats()["num_device_alloc"]
        small = torch.empty(30 * MIB // 4, device="cuda")  # not from the oversize free segment: a new one
        assert stats()["num_device_alloc"] == made + 1
        del small
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    with torchdevice.installed("cuda-sim"):
        assert stats()["max_split_size"] == -1


def test_a_bad_setting_is_torchs_error_at_the_first_allocation(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:2")
    with torchdevice.installed("cuda-sim"):
        assert torch.cuda.is_available()
        with pytest.raises(ValueError, match="^CachingAllocator option max_split_size_mb too small, must be >= 20"):
            torch.empty(4, device="cuda")
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_splitsize_mb:100")
    with torchdevice.installed("cuda-sim"):
        # torch's common parser's words where it refuses unknown keys (2.15), else CUDA's own parser's (2.13)
        with pytest.raises(ValueError, match=r"^Unrecognized key 'max_splitsize_mb' in (CUDA|Accelerator) allocator "
                                             r"config\.$"):
            torch.empty(4, device="cuda")


def test_roundup_power2_divisions_rounds_as_cuda_rounds(monkeypatch):
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "roundup_power2_divisions:4")
    with torchdevice.installed("cuda-sim"):
        before = torch.cuda.memory_allocated()
        kept = torch.empty(1_300_000, dtype=torch.uint8, device="cuda")  # between 1 MiB and 2 MiB: quarters of 1 MiB
        assert torch.cuda.memory_allocated() - before == MIB + MIB // 4
        del kept


def test_torchs_own_tools_read_the_statistics_and_the_segments(card):
    kept = [torch.empty(n, device="cuda") for n in (1000, 3_000_000)]
    nested = torch.cuda.memory_stats_as_nested_dict()
    assert list(nested)[:6] == ["num_alloc_retries", "num_ooms", "max_split_size", "num_sync_all_streams",
                                "num_device_alloc", "num_device_free"]
    assert set(nested["allocated_bytes"]) == {"all", "small_pool", "large_pool"}
    assert nested["reserved_bytes"]["all"]["current"] == torch.cuda.memory_reserved()
    summary = torch.cuda.memory_summary()
    assert "PyTorch CUDA memory summary, device ID 0" in summary and "| GPU reserved memory   |" in summary
    segments = torch.cuda.memory_snapshot()
    assert sum(s["total_size"] for s in segments) == torch.cuda.memory_reserved()
    assert sum(s["allocated_size"] for s in segments) == torch.cuda.memory_allocated()
    for segment in segments:
        assert sum(b["size"] for b in segment["blocks"]) == segment["total_size"]
        assert segment["blocks"][0]["address"] == segment["address"]
        assert segment["segment_type"] == ("small" if segment["total_size"] == 2 * MIB else "large")
    del kept


def test_lightnings_device_stats_read_cudas_keys(card):
    from pytorch_lightning.accelerators import CUDAAccelerator

    kept = torch.empty(1000, device="cuda")
    found = CUDAAccelerator().get_device_stats(torch.device("cuda", 0))
    for key in ("allocated_bytes.all.freed", "inactive_split.all.peak", "reserved_bytes.large_pool.peak"):
        assert key in found
    assert found["allocated_bytes.all.current"] == torch.cuda.memory_allocated()
    del kept


def test_the_memory_history_is_cudas_and_torchs_own_viewer_reads_it(card, tmp_path):
    """``_record_memory_history``: the trace holds the allocator's actions in order, each allocation where the program
    made it (the runtime's own frames left out, as a GPU has none), the freed block's free; ``_dump_snapshot`` writes
    what ``torch.cuda._memory_viz`` reads; recording stops when asked."""
    from torch.cuda import _memory_viz

    torch.cuda.empty_cache()
    reserved = torch.cuda.memory_reserved()
    torch.cuda.memory._record_memory_history(max_entries=100)
    try:
        line = inspect.currentframe().f_lineno + 1
        kept, freed = torch.empty(300_000, device="cuda"), torch.empty(10, device="cuda")
        del freed
        torch.cuda.memory._dump_snapshot(str(tmp_path / "snapshot.pickle"))
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    snapshot = pickle.loads((tmp_path / "snapshot.pickle").read_bytes())
    trace = snapshot["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc"]
    assert [e["size"] for e in allocs] == [1_200_000, 40]
    assert all(e["frames"][0] == {"name": "test_the_memory_history_is_cudas_and_torchs_own_viewer_reads_it",
                                  "filename": __file__, "line": line} for e in allocs)
    frees = [(e["action"], e["addr"], e["size"]) for e in trace if e["action"].startswith("free")]
    assert frees == [("free_requested", allocs[1]["addr"], 40), ("free_completed", allocs[1]["addr"], 40)]
    made = sum(e["size"] for e in trace if e["action"] == "segment_alloc")
    assert made == torch.cuda.memory_reserved() - reserved  # every segment the two made, and no other
    (block,) = [b for s in snapshot["segments"] for b in s["blocks"] if b["address"] == allocs[0]["addr"]]
    assert block["state"] == "active_allocated" and block["frames"] == allocs[0]["frames"]
    assert snapshot["segments"] == torch.cuda.memory_snapshot()
    shown = _memory_viz.trace(snapshot)
    assert shown.count("cudaMalloc(") == sum(e["action"] == "segment_alloc" for e in trace) and "del " in shown
    assert "<html>" in _memory_viz.trace_plot(snapshot).lower()
    torch.empty(10, device="cuda")
    assert torch.cuda.memory._snapshot()["device_traces"][0] == []
    del kept


def test_settings_changed_while_the_program_runs_decide_from_then_on(card):
    """``_set_allocator_settings``: torch's parser takes the string (its own error for a bad value), and the
    allocator decides by it from then on: with ``max_split_size_mb:20`` a freed 26 MiB segment is oversize, so a
    5 MiB request no longer splits it but gets a 20 MiB segment of its own."""
    def reserved_for_two() -> int:
        torch.cuda.empty_cache()
        before = torch.cuda.memory_reserved()
        first = torch.empty(25 * MIB // 4, device="cuda")
        del first
        second = torch.empty(5 * MIB // 4, device="cuda")
        try:
            return torch.cuda.memory_reserved() - before
        finally:
            del second

    with pytest.warns(FutureWarning):
        with pytest.raises(ValueError, match="max_split_size_mb"):
            torch.cuda.memory._set_allocator_settings("max_split_size_mb:4")
    assert reserved_for_two() == 26 * MIB
    with pytest.warns(FutureWarning):
        torch.cuda.memory._set_allocator_settings("max_split_size_mb:20")
    assert stats()["max_split_size"] == 20 * MIB
    assert reserved_for_two() == 26 * MIB + 20 * MIB
    with pytest.warns(FutureWarning):
        torch.cuda.memory._set_allocator_settings("garbage_collection_threshold:0.5")
    settings = torch.cuda.memory._snapshot()["allocator_settings"]  # the string last given; the earlier keys stay
    assert settings["PYTORCH_CUDA_ALLOC_CONF"] == "garbage_collection_threshold:0.5"
    assert (settings["max_split_size"], settings["garbage_collection_threshold"]) == (20 * MIB, 0.5)
    assert reserved_for_two() == 26 * MIB + 20 * MIB


def test_an_out_of_memory_observer_is_called_before_the_error_and_may_take_a_snapshot(card):
    """``_cuda_attach_out_of_memory_observer``: called with the device, the segment it could not have, the memory
    the process may use and the memory free, before CUDA's error (torch's memory docs dump a snapshot there)."""
    seen = []
    torch._C._cuda_attach_out_of_memory_observer(
        lambda *numbers: seen.append((numbers, torch.cuda.memory._snapshot()["segments"])))
    total = torch.cuda.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as raised:
        torch.empty(total, dtype=torch.uint8, device="cuda")
    ((device, alloc, allowed, free), segments), = seen
    assert (device, allowed) == (0, total) and alloc >= total
    assert f"Tried to allocate {alloc / (1 << 30):.2f} GiB" in str(raised.value)
    assert free == total - sum(s["total_size"] for s in segments)
