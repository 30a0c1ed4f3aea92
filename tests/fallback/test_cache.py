"""The capability cache: lookups, persistence, its location, corrupt and foreign files, concurrency."""

from __future__ import annotations

import json
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


@pytest.mark.skipif(sys.platform == "win32", reason="the user cache directory comes from the Windows shell")
def test_location(monkeypatch, tmp_path):
    monkeypatch.delenv("TORCHDEVICE_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    # the operating system's user cache directory: ~/Library/Caches on macOS, not the XDG one
    default = Path("Library", "Caches") if sys.platform == "darwin" else Path(".cache")
    assert cache_dir() == tmp_path / "home" / default / "torchdevice"
    if sys.platform == "linux":
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert cache_dir() == tmp_path / "xdg" / "torchdevice"
        monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as the XDG specification says
        assert cache_dir() == tmp_path / "home" / ".cache" / "torchdevice"
    monkeypatch.setenv("TORCHDEVICE_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    assert versions()["torch"] in cache_path().name and versions()["torchdevice"] in cache_path().name


@pytest.mark.parametrize("home", ["", "/", "relative"])
def test_without_a_home_directory_the_cache_stays_in_memory(monkeypatch, home):
    monkeypatch.delenv("TORCHDEVICE_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", home)
    assert cache_dir() is None and cache_path() is None  # not /.cache, nor a folder in the working directory
    cache = CapabilityCache.open("mps")
    cache.record("aten::erfinv", "float64", "dtype")
    assert cache.path is None and cache.learned() == {"aten::erfinv": {"float64": "dtype"}}


VALID = json.dumps({"format": FORMAT, **versions(), "targets": {"mps": {"aten::sort": {"*": "kernel"}}}}).encode()


@pytest.mark.parametrize("content", [
    b"{not json",
    b"[]",
    json.dumps({"format": FORMAT, **versions(), "targets": {"mps": {"aten::x": {"float64": "maybe"}}}}).encode(),
    json.dumps({"format": FORMAT, **versions(), "torch": "1.0.0", "targets": {"mps": {"aten::x": {"*": "kernel"}}}})
    .encode(),
    VALID[:-1] + b"\xff\xfe}",
    VALID[: len(VALID) // 2],
    b"[" * 100_000 + b"]" * 100_000,
], ids=["corrupt", "not-a-mapping", "bad-reason", "other-torch", "not-utf8", "truncated", "nested"])
def test_bad_file_is_ignored_with_one_warning_and_rebuilt(cache_dir, content):
    cache_dir.mkdir()
    cache_path().write_bytes(content)
    with pytest.warns(RuntimeWarning, match="ignoring capability cache") as warned:
        cache = CapabilityCache.open("mps")
        cache.record("aten::erfinv", "float64", "dtype")
        cache.record("aten::cumsum", "int64", "dtype")
        again = CapabilityCache.open("mps")
    assert len(warned) == 1
    learned = {"aten::erfinv": {"float64": "dtype"}, "aten::cumsum": {"int64": "dtype"}}
    assert cache.learned() == again.learned() == learned


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges on Windows")
def test_a_symbolic_link_in_place_of_the_lock_is_not_followed(cache_dir, tmp_path):
    cache_dir.mkdir()
    victim = tmp_path / "victim"
    lock = cache_path().with_name(cache_path().name + ".lock")
    lock.symlink_to(victim)  # dangling: following it would create the victim
    cache = CapabilityCache.open("mps")
    cache.record("aten::erfinv", "float64", "dtype")  # not written, kept in memory
    assert not victim.exists() and lock.is_symlink()
    assert cache.learned() == {"aten::erfinv": {"float64": "dtype"}}
    victim.write_text("precious\n")
    CapabilityCache.open("mps").record("aten::cumsum", "int64", "dtype")
    assert victim.read_text() == "precious\n"


def record_many(directory: str, worker: int, count: int, start: multiprocessing.synchronize.Barrier) -> None:
    """A process learning ``count`` verdicts, each written at once (run in a child process)."""
    import os

    os.environ["TORCHDEVICE_CACHE_DIR"] = directory
    cache = CapabilityCache.open("mps")
    start.wait()
    for i in range(count):
        cache.record(f"aten::op{worker}_{i}", "float32", "dtype")


@pytest.mark.processes
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
