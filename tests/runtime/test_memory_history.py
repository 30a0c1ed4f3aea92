"""torch's memory history on the targets without CUDA's caching allocator (cpu, mps-sim): a program that records
its GPU's memory history and dumps a snapshot runs to its end, its snapshot empty (no segments, an empty trace per
device), which torch's own viewer reads; uninstalled, torch is as it was."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import torchdevice


@pytest.mark.parametrize("target", ["cpu", "mps-sim"])
def test_a_program_recording_its_memory_history_runs(target, tmp_path):
    had = hasattr(torch._C, "_cuda_record_memory_history")
    with torchdevice.installed(target, devices=2):
        torch.cuda.memory._record_memory_history(max_entries=1000)  # as torch's memory docs write it
        torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=10)  # the older form
        x = torch.randn(64, 64, device="cuda") @ torch.randn(64, 64, device="cuda")
        torch.cuda.memory._dump_snapshot(str(tmp_path / "snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
        snapshot = pickle.loads((tmp_path / "snapshot.pickle").read_bytes())
        assert snapshot == {"segments": [], "device_traces": [[], []]} == torch.cuda.memory._snapshot()
        assert "<html>" in _memory_viz.trace_plot(snapshot).lower() and x.shape == (64, 64)
    assert hasattr(torch._C, "_cuda_record_memory_history") is had
