"""The capability cache: lookups, persistence, its location, corrupt and foreign files, concurrency."""

from __future__ import annotations

import json
import logging
import multiprocessing
import sys
from pathlib import Path

import pytest

from torchdevice.fallback.cache import ANY, FORMAT, CapabilityCache, cache_dir, cache_path, versions


def test_verdicts_per_dtype_and_for_every_dtype():
    cache = CapabilityCache("mps", None)
    cache.seed(["aten::binomial"])
    cache.record("aten::erfinv", "float64", "dtype")
    assert cache.fails("aten::binomial", "float32") and cache.fails("aten::binomial", "int64")
    assert cache.fails("aten::erfinv", "float64") and not cache.fails("aten::erfinv", "float32")
    assert not cache.fails("aten::add.Tensor", "float32")
    assert cache.learned() == {"aten::erfinv": {"float64": "dtype"}}  # the seed is the table's, not learned


def test_learned_verdicts_persist_per_target_and_merge(cache_dir):
    first = CapabilityCache.open("mps")
    first.record("aten::erfinv", "float64", "dtype")
    other = CapabilityCache.open("cpu")
    other.record("aten::cumsum", ANY, "kernel")
    stale = CapabilityCache("mps", cache_path())  # opened before `later` writes: must not lose its verdict
    later = CapabilityCache.open("mps")
    later.record("aten::cumsum", "int64", "dtype")
    stale.record("aten::sort", ANY, "kernel")
    assert CapabilityCache.open("mps").learned() == {
        "aten::erfinv": {"float64": "dtype"}, "aten::cumsum": {"int64": "dtype"}, "aten::sort": {ANY: "kernel"},
    }
    assert CapabilityCache.open("cpu").learned() == {"aten::cumsum": {ANY: "kernel"}}
    doc = json.loads(cache_path().read_text())
    assert (doc["format"], doc["torch"], doc["torchdevice"]) == (FORMAT, versions()["torch"], versions()["torchdevice"])
    assert cache_path().parent == cache_dir


def test_location(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHDEVICE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "torchdevice"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "torchdevice"
    monkeypatch.setenv("TORCHDEVICE_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    assert versions()["torch"] in cache_path().name and versions()["torchdevice"] in cache_path().name


@pytest.mark.parametrize("content", [
    "{not json",
    "[]",
    json.dumps({"format": FORMAT, **versions(), "targets": {"mps": {"aten::x": {"float64": "maybe"}}}}),
    json.dumps({"format": FORMAT, **versions(), "torch": "1.0.0", "targets": {"mps": {"aten::x": {"*": "kernel"}}}}),
], ids=["corrupt", "not-a-mapping", "bad-reason", "other-torch"])
def test_bad_file_is_ignored_with_one_warning_and_rebuilt(cache_dir, caplog, content):
    cache_dir.mkdir()
    cache_path().write_text(content)
    with caplog.at_level(logging.WARNING, logger="torchdevice.fallback"):
        cache = CapabilityCache.open("mps")
        cache.record("aten::erfinv", "float64", "dtype")
        cache.record("aten::cumsum", "int64", "dtype")
        again = CapabilityCache.open("mps")
    assert len(caplog.records) == 1 and "ignoring capability cache" in caplog.records[0].getMessage()
    learned = {"aten::erfinv": {"float64": "dtype"}, "aten::cumsum": {"int64": "dtype"}}
    assert cache.learned() == again.learned() == learned


def record_many(directory: str, worker: int, count: int, start: multiprocessing.synchronize.Barrier) -> None:
    """A process learning ``count`` verdicts, each written at once (run in a child process)."""
    import os

    os.environ["TORCHDEVICE_CACHE_DIR"] = directory
    cache = CapabilityCache.open("mps")
    start.wait()
    for i in range(count):
        cache.record(f"aten::op{worker}_{i}", "float32", "dtype")


def test_concurrent_processes_merge_without_corruption(cache_dir):
    workers, count = 4, 25
    # fork where it is safe (Linux): the children only do file I/O, and need not import torch again
    context = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    start = context.Barrier(workers)
    processes = [context.Process(target=record_many, args=(str(cache_dir), w, count, start)) for w in range(workers)]
    for p in processes:
        p.start()
    for p in processes:
        p.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * workers
    learned = CapabilityCache.open("mps").learned()
    assert learned == {f"aten::op{w}_{i}": {"float32": "dtype"} for w in range(workers) for i in range(count)}
    assert not [p for p in Path(cache_dir).iterdir() if p.name.endswith(".tmp")]
