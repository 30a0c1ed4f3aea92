"""The report of a whole program: what the runtime did in every process, one file written at exit (JSON, or a
page to look at when its name ends in ``.html``: :mod:`.page`), and a short summary on stderr.

The process that asks for it (``torchdevice run --report FILE``, ``install(report=FILE)``,
``TORCHDEVICE_REPORT=FILE``, a ``pytest --torchdevice`` session, whose report may be only summed up in its terminal
summary: :mod:`torchdevice.pytest_plugin`) is the program's *main* process: it makes a temporary directory, which
``TORCHDEVICE_INSTALL`` names for every process the program starts (``report=DIR``, see
:mod:`.processes`), so that each of them joins. At its exit each process writes its own entry there
(``PID.json``: pid, parent, role, command, seconds, redirects, fallbacks per aten overload and route
with seconds and why, stand-ins, Triton kernels with their launches and seconds, torchdevice's warnings); the
main process, at its exit, adds its own, merges them all into FILE (written whole or not at all), with the
program's target and the versions of torch, torchdevice, Python and the platform, and removes the directory. Forked
children (``fork`` start method, ``os.fork``) start from zeroed counters and write their own entry too.

Asked for or not, the runtime counts the same things (:mod:`.counts`): the report adds nothing to
a call, only the writing at exit. A process still running when the main one exits is not in the
report. A report file that cannot be written costs the run nothing: one line says so on stderr (at
the start where it can be seen then, else at exit), and the summary is printed anyway.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing.util
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from torchdevice.reporting import counts as report
from torchdevice.reporting import fit

VARIABLE = "TORCHDEVICE_REPORT"
"""Where the main process writes the report, for programs not started with ``torchdevice run --report``."""

FORMAT = 1
SHOWN = 8
"""Fallback rows and redirected entries named in the summary."""


class Session:
    """This process's part in a report: where its entry goes, and (in the main process) where the report goes."""

    def __init__(self, directory: str, path: Path | None, forked: bool = False, started: float | None = None,
                 main: bool = False) -> None:
        self.directory = directory
        self.path = path
        self.main = main
        """The program's main process: it merges the entries (and writes them to ``path`` where there is one)."""
        self.forked = forked
        self.pid = os.getpid()
        self.started = time.perf_counter() if started is None else started
        self.warnings: list[str] = []
        self.done = False
        self.said_unwritable = False


_session: Session | None = None
_hooks_set = False
_IMPORTED = time.perf_counter()
"""When this process began to count for a report it has not started (:func:`so_far`)."""


def start(path: str | os.PathLike[str] | None) -> None:
    """Make this process the main one of a report written to ``path`` at exit (again with the same path: nothing;
    None: a report only summed up, written nowhere, as the pytest plugin's terminal summary without a file)."""
    global _session
    target = Path(path).absolute() if path is not None else None
    if _session is not None and _session.main and not _session.done and _session.path == target \
            and _session.pid == os.getpid():
        return
    _session = Session(tempfile.mkdtemp(prefix="torchdevice-report-"), target, main=True)
    if target is not None and not _writable(target):  # said now, before a long run, and not again at exit
        _session.said_unwritable = True
        print(f"torchdevice: cannot write the report to {target} (a missing or read-only directory); "
              "the program runs, and the summary is printed at exit", file=sys.stderr)
    _set_hooks()


def join(directory: str) -> None:
    """Write this process's entry into ``directory`` at exit (a process the main one started)."""
    global _session
    if _session is not None and _session.directory == directory and _session.pid == os.getpid():
        return
    if not os.path.isdir(directory):
        return  # the main process is gone: nobody would read it
    _session = Session(directory, None)
    _set_hooks()


def directory() -> str | None:
    """The directory that processes started from now on write their entries into, when a report is being made."""
    return _session.directory if _session is not None else None


def note_warning(text: str) -> None:
    """Keep a warning of torchdevice's for the report (the ones it shows through :mod:`warnings` are kept anyway)."""
    if _session is not None and text not in _session.warnings:
        _session.warnings.append(text)


def _set_hooks() -> None:
    global _hooks_set
    if _hooks_set:
        return
    _hooks_set = True
    atexit.register(finish)
    os.register_at_fork(after_in_child=_forked)
    shown = warnings.showwarning

    def showwarning(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if str(message).startswith("torchdevice"):
            note_warning(f"{category.__name__}: {message}")
        shown(message, category, *args, **kwargs)

    warnings.showwarning = showwarning
    logging.getLogger("torchdevice").addHandler(_Warnings())


class _Warnings(logging.Handler):
    """The ``torchdevice`` logger's warnings, kept for the report."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        note_warning(record.getMessage())


def _forked() -> None:
    """In a forked child: its own counters and its own entry; multiprocessing's fork children leave through
    ``os._exit``, so their entry is written by one of multiprocessing's finalizers instead of ``atexit``."""
    global _session
    if _session is None:
        return
    report.flush()  # the parent's pending counts, then all of the parent's counts, are not this child's
    report.reset()
    _session = Session(_session.directory, None, forked=True)
    multiprocessing.util.register_after_fork(_session, _finalize_in_child)


def _finalize_in_child(session: Session) -> None:
    multiprocessing.util.Finalize(session, finish, exitpriority=100)


def finish(say: Callable[[str], object] | None = None) -> None:
    """At exit: write this process's entry; in the main process, merge every entry into the report, and give its
    summary to ``say`` (default: print it on stderr). Once: later calls, and the exit after an early call, do
    nothing."""
    session = _session
    if session is None or session.done or session.pid != os.getpid():
        return
    session.done = True
    say = say or (lambda text: print(text, file=sys.stderr))
    entry = _entry(session)
    if not session.main:
        try:
            from torchdevice import atomic

            atomic.write(Path(session.directory) / f"{session.pid}.json", json.dumps(entry))
        except OSError:
            pass  # the main process removed the directory: it has written the report already
        return
    others = _read_entries(session.directory)
    shutil.rmtree(session.directory, ignore_errors=True)
    document = merge(entry, others)
    where = ""
    if session.path is not None:
        try:
            from torchdevice import atomic

            atomic.write(session.path, _content(document, session.path))
            where = str(session.path)
        except OSError as exc:
            if not session.said_unwritable:
                say(f"torchdevice: cannot write the report to {session.path}: {exc.strerror or exc}")
    say(summary(document, where))


def _content(document: dict[str, Any], path: Path) -> str:
    """The report file's content: a page (:mod:`.page`) for a name ending in ``.html`` or ``.htm``, else JSON."""
    from torchdevice.reporting import page

    if path.suffix.lower() in page.SUFFIXES:
        return page.render(document)
    return json.dumps(document, indent=1) + "\n"


def versions() -> dict[str, str]:
    """What the program ran with: torch, the known release whose facts the runtime used (its own, or the newest
    known's on a newer torch), torchdevice, Python and the platform (its system and release, macOS's version, the
    machine; not :func:`platform.platform`, which starts a process)."""
    import torch

    from torchdevice import releases
    from torchdevice.version import __version__

    uname = platform.uname()
    system = f"macOS {platform.mac_ver()[0]}" if uname.system == "Darwin" else f"{uname.system} {uname.release}"
    return {"torch": str(torch.__version__), "torch_facts": releases.facts_of(), "torchdevice": __version__,
            "python": platform.python_version(), "platform": f"{system} {uname.machine}"}


def _entry(session: Session) -> dict[str, Any]:
    report.flush()
    return {
        "pid": session.pid,
        "parent_pid": os.getppid(),
        "role": "main" if session.main else _role(session),
        "command": shlex.join(sys.orig_argv),
        "target": report.target(),
        "seconds": time.perf_counter() - session.started,
        "redirects": report.report()["redirects"],
        "fallbacks": report.fallback_rows(),
        "standins": {name: sum(routes.values()) for name, routes in report.report()["standins"].items()},
        "triton": report.triton(),
        "gpu_memory": fit.rows(),
        "warnings": list(session.warnings),
    }



def _role(session: Session) -> str:
    """What this child process is to the program."""
    data = sys.modules.get("torch.utils.data")
    info = data.get_worker_info() if data is not None else None
    if info is not None:
        return f"DataLoader worker {info.id}"
    if "PYTEST_XDIST_WORKER" in os.environ and "xdist" in sys.modules:  # the worker, not a process it started
        return f"pytest-xdist worker {os.environ['PYTEST_XDIST_WORKER']}"
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return f"rank {distributed.get_rank()}"
    if "RANK" in os.environ:
        return f"rank {os.environ['RANK']}"
    name = multiprocessing.current_process().name
    if name != "MainProcess":
        return f"multiprocessing {name}"
    if session.forked:
        return "forked child"
    return "Jupyter kernel" if "ipykernel" in sys.modules else "subprocess"


def so_far() -> dict[str, Any]:
    """This process's report until now, as :func:`merge` makes it (``%torchdevice report`` in a notebook)."""
    return merge(_entry(_session or Session("", None, started=_IMPORTED)), [])


def _read_entries(directory: str) -> list[dict[str, Any]]:
    entries = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            entries.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return entries


def merge(main: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any]:
    """The report: every process's entry (main first, each fallback row with its ``share`` of the process's
    time), and the program's totals (the shares of the main process's wall time)."""
    processes = [main, *sorted(others, key=lambda e: e["pid"])]
    redirects: dict[str, dict[str, int]] = {}
    fallbacks: dict[tuple[str, str], dict[str, Any]] = {}
    standins: dict[str, int] = {}
    triton: dict[str, dict[str, Any]] = {}
    warned: list[str] = []
    for p in processes:
        for op, routes in p["redirects"].items():
            for route, n in routes.items():
                redirects.setdefault(op, {}).setdefault(route, 0)
                redirects[op][route] += n
        for row in p["fallbacks"]:
            row["share"] = row["seconds"] / p["seconds"] if p["seconds"] > 0 else 0.0
            total = fallbacks.setdefault((row["op"], row["route"]), {**row, "count": 0, "seconds": 0.0})
            total["count"] += row["count"]
            total["seconds"] += row["seconds"]
        for name, n in p["standins"].items():
            standins[name] = standins.get(name, 0) + n
        for kernel, launched in p.get("triton", {}).items():
            total = triton.setdefault(kernel, {"launches": 0, "seconds": 0.0})
            total["launches"] += launched["launches"]
            total["seconds"] += launched["seconds"]
        warned += [w for w in p["warnings"] if w not in warned]
    wall = main["seconds"]
    rows = sorted(fallbacks.values(), key=lambda r: (-r["seconds"], r["op"], r["route"]))
    for row in rows:
        row["share"] = row["seconds"] / wall if wall > 0 else 0.0
    return {
        "format": FORMAT,
        "command": main["command"],
        "target": main["target"],
        "versions": versions(),
        "wall_seconds": wall,
        "processes": processes,
        "redirects": {op: redirects[op] for op in sorted(redirects)},
        "fallbacks": rows,
        "standins": standins,
        "triton": {kernel: triton[kernel] for kernel in sorted(triton)},
        "fit": fit.verdicts(processes),
        "warnings": warned,
    }


def summary(document: dict[str, Any], where: str) -> str:
    """A few lines for stderr: processes and time, what was redirected, what fell back, stand-ins, warnings."""
    n = len(document["processes"])
    lines = [f"torchdevice report: {n} process{'es' if n != 1 else ''}, {document['wall_seconds']:.1f} s, "
             f"target {document['target']}" + (f"; written to {where}" if where else "")]
    redirected = sorted(((sum(r.values()), op) for op, r in document["redirects"].items()), reverse=True)
    total = sum(count for count, _ in redirected)
    named = ", ".join(f"{op} {count:,}" for count, op in redirected[:SHOWN])
    lines.append(f"  redirected: {total:,} calls" + (f" ({named}{', ...' if len(redirected) > SHOWN else ''})"
                                                      if redirected else ""))
    if not document["fallbacks"]:
        lines.append("  fallbacks: none")
    else:
        calls = sum(r["count"] for r in document["fallbacks"])
        seconds = sum(r["seconds"] for r in document["fallbacks"])
        share = seconds / max(document["wall_seconds"], 1e-9)
        lines.append(f"  fallbacks: {calls:,} calls, {seconds:.3f} s ({share:.1%} of the wall time)")
        for r in document["fallbacks"][:SHOWN]:
            lines.append(f"    {r['op']}  {r['route']}  {r['count']:,} calls  {r['seconds']:.3f} s  {r['share']:.1%}"
                         f"  ({r['why'] or 'reason unknown'})")
        if len(document["fallbacks"]) > SHOWN:
            lines.append(f"    ... {len(document['fallbacks']) - SHOWN} more in the report")
    standins = document["standins"]
    lines.append("  stand-ins: " + (", ".join(f"{k} {v:,}" for k, v in sorted(standins.items())) or "none"))
    kernels = document.get("triton", {})
    if kernels:
        launches = sum(k["launches"] for k in kernels.values())
        seconds = sum(k["seconds"] for k in kernels.values())
        named = ", ".join(f"{name.rpartition('.')[2]} {k['launches']:,}" for name, k in sorted(
            kernels.items(), key=lambda item: -item[1]["seconds"])[:SHOWN])
        plural = "es" if launches != 1 else ""
        lines.append(f"  triton kernels: {len(kernels)}, {launches:,} launch{plural} in Triton's interpreter, "
                     f"{seconds:.3f} s ({named}{', ...' if len(kernels) > SHOWN else ''})")
    lines += fit.summary(document)
    lines.append("  warnings: " + ("none" if not document["warnings"] else str(len(document["warnings"]))))
    lines += [f"    {w}" for w in document["warnings"][:SHOWN]]
    return "\n".join(lines)


def _writable(path: Path) -> bool:
    if path.is_dir():
        return False
    if path.exists():
        return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
    return path.parent.is_dir() and os.access(path.parent, os.W_OK)
