"""A function over many files, computed in a pool of worker processes, results in order.

Workers only compute: what they return goes to the parent process, which alone writes. Workers ignore
Ctrl-C (the parent stops them) and end by themselves when the parent is gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


@contextlib.contextmanager
def parallel(function: Callable[[T], R], tasks: list[T], jobs: int) -> Iterator[Iterator[R]]:
    """``function``'s results over ``tasks``, in order, computed by a pool of ``jobs`` worker processes (here
    for one job or one task); ``function`` is a module-level function, so that it reaches spawned workers."""
    if jobs <= 1 or len(tasks) <= 1:
        yield map(function, tasks)
        return
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), initializer=worker, initargs=(os.getpid(),))
    try:
        yield pool.map(function, tasks, chunksize=max(1, len(tasks) // (jobs * 32)))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


def worker(parent: int) -> None:
    """In each worker of a pool (this module's, codegen's): leave Ctrl-C to the parent, and end when the parent is
    gone (killed, its pool's pipes left open by the other workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    spawner = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.2)
            if os.getppid() != spawner or not _alive(parent):
                os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
