"""``--write`` against a world that moves: a file edited while the run works on it, and a run killed while its
workers work. Real processes, watched through Linux's inotify and /proc."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.processes,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify and /proc are Linux's")]

SLOW = "import torch\n" + "x = torch.zeros(1).cuda()\n" * 3_000  # seconds of work for the rewriter
IN_CLOSE_NOWRITE = 0x10


def _start(*args: str | Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "torchdevice", "rewrite", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _wait_until_read(path: Path, process: subprocess.Popen[str], timeout: float = 60) -> None:
    """Block until some process closes ``path`` after reading it (the rewriter has its content)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    try:
        assert libc.inotify_add_watch(fd, str(path).encode(), IN_CLOSE_NOWRITE) >= 0
        process_started = process.poll() is None
        assert process_started, "the run ended before reading"
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"{path} was not read within {timeout} s"
        event = os.read(fd, 4096)
        assert struct.unpack_from("iIII", event)[1] & IN_CLOSE_NOWRITE
    finally:
        os.close(fd)


def test_a_file_edited_during_the_run_keeps_the_edit(tmp_path):
    path = tmp_path / "slow.py"
    path.write_text(SLOW)
    run = _start("--write", "--jobs", "1", path)
    _wait_until_read(path, run)
    with path.open("a") as f:  # the user saves an edit while the rewrite is under way
        f.write("# edited meanwhile\n")
    out, err = run.communicate(timeout=120)
    assert run.returncode == 123, err
    assert f"error: {path}: not written: it changed since it was read" in err
    assert path.read_text() == SLOW + "# edited meanwhile\n"
    assert sorted(os.listdir(tmp_path)) == ["slow.py"]


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_workers_end_when_the_parent_is_killed_and_nothing_is_written_after(tmp_path):
    for i in range(8):
        (tmp_path / f"m{i}.py").write_text(SLOW)
    run = _start("--write", "--jobs", "2", tmp_path)
    deadline = time.monotonic() + 60
    while len(workers := [p for p in _children(run.pid) if _alive(p)]) < 2:
        assert time.monotonic() < deadline and run.poll() is None, "no workers started"
        time.sleep(0.05)
    run.send_signal(signal.SIGKILL)
    run.wait()
    contents = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers):
        assert time.monotonic() < deadline, f"workers {workers} still running 10 s after their parent was killed"
        time.sleep(0.05)
    time.sleep(0.5)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == contents
    assert not [name for name in contents if name.endswith(".tmp")]
