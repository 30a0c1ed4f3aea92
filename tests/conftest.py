"""The suite's tiers: a test that starts a process (a subprocess, a ``multiprocessing`` child, a torchrun or
``mp.spawn`` rank) is marked ``processes``; ``make test-fast`` leaves those out. A test that starts one unmarked
fails, naming the marker, so the fast tier stays free of them as tests are added. The consistency tier
(``tests/consistency``, marked ``consistency``) runs only when asked (``make test-consistency``), on the target
``--consistency-target`` names."""

from __future__ import annotations

import multiprocessing.process
import subprocess
from collections.abc import Iterator

import pytest

MARKER = "processes"


class _Starts:
    """Counts the processes started in this worker while a test's body runs."""

    count = 0


def _counting(original):  # type: ignore[no-untyped-def]
    def start(*args, **kwargs):  # type: ignore[no-untyped-def]
        _Starts.count += 1
        return original(*args, **kwargs)

    return start


subprocess.Popen._execute_child = _counting(subprocess.Popen._execute_child)  # type: ignore[attr-defined]
multiprocessing.process.BaseProcess.start = _counting(multiprocessing.process.BaseProcess.start)  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    before = _Starts.count
    result = yield
    if _Starts.count > before and item.get_closest_marker(MARKER) is None:
        pytest.fail(f"{item.nodeid} starts a process: mark it @pytest.mark.{MARKER} (make test-fast leaves such tests "
                    "out)", pytrace=False)
    return result


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A slow test is a multi-process run: it is marked ``processes`` too. Tests that start processes run first, the
    slow ones first of all, so that the parallel workers share the long runs and finish on the thousands of short
    tests, not on one long run while the other workers wait (``make test`` hands tests to the workers one at a time,
    ``--maxschedchunk=1``: in the larger chunks xdist sends by default, one worker would get every long run)."""
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(MARKER)
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, item.get_closest_marker(MARKER) is None))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--consistency-target", default="mps-sim", choices=("mps-sim", "cuda-sim", "cpu"),
                     help="the target the consistency tier (tests/consistency, make test-consistency) installs")


def pytest_configure(config: pytest.Config) -> None:
    """The simulated devices' compiled backend built before any test runs (a build starts the compiler's processes;
    torchdevice builds it at the first install of a simulated target, and every later process loads it), the
    machine's processor read (``platform``'s first call runs ``uname -p``, once per process), and where torch's
    extensions are built."""
    import os
    import platform
    import sys
    from pathlib import Path

    from torchdevice.simulated import backend

    backend.loadable()
    platform.platform()
    # torch's extension builds (DeepSpeed's CPU ops) per environment: each torch release of the release tiers builds
    # its own, and a build one environment's killed run left locked does not stall another's
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path(sys.prefix) / "torch_extensions"))
