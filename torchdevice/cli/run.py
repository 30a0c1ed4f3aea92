"""``torchdevice run [--target T] [--devices N] SCRIPT [ARGS...]`` and ``torchdevice run [...] -m MODULE [ARGS...]``.

Runs the program as ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``) would, with the runtime
installed first, in this process and in every Python process the program starts: same ``sys.argv``,
``__main__``, ``sys.path[0]`` and exit status. SCRIPT may be a directory or a zip file with a
``__main__.py``, as for ``python``. An uncaught exception is reported through ``sys.excepthook`` with
the program's own frames only; an uncaught ``KeyboardInterrupt`` (Ctrl-C) then ends the process the
way Python ends it, killed by SIGINT (exit status 130 in a shell), so that shell loops stop.

``torchdevice run [...] [--output PATH | --inplace] NOTEBOOK.ipynb`` runs a notebook's cells through a Jupyter kernel
that the runtime installed here follows (:mod:`torchdevice.notebooks.execute`).
"""

from __future__ import annotations

import argparse
import builtins
import importlib.machinery
import importlib.util
import io
import os
import pkgutil
import runpy
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

_OWN_MODULES = (__name__, "runpy")


def configure(parser: argparse.ArgumentParser) -> None:
    from torchdevice.device.target import TARGETS

    parser.usage = ("torchdevice run [-h] [--target T] [--devices N] [--gpu NAME | --gpu-memory SIZE] [--report FILE] "
                    "(SCRIPT | -m MODULE) [ARGS...]\n"
                    "       torchdevice run [...] [--output PATH | --inplace] NOTEBOOK.ipynb")
    parser.add_argument("--target", choices=TARGETS, metavar="{" + ",".join(TARGETS) + "}",
                        help="where \"cuda\" goes (default: $TORCHDEVICE_TARGET, else the best device here); "
                             "mps-sim: Apple silicon's kernels and dtypes, simulated on this machine; cuda-sim: "
                             "NVIDIA GPUs, simulated on this machine (tensors on cuda:i)")
    parser.add_argument("--devices", type=_positive, metavar="N",
                        help="emulate N CUDA devices, each of them the target (default: $TORCHDEVICE_DEVICES, else 1)")
    parser.add_argument("--gpu", metavar="NAME", help="cuda-sim: the card simulated (T4, A100-40GB, H100 ...; default: "
                        "$TORCHDEVICE_GPU, else T4)")
    parser.add_argument("--gpu-memory", metavar="SIZE", help="cuda-sim: each GPU's memory (16GB, 1GiB ...; default: "
                        "$TORCHDEVICE_GPU_MEMORY, else the card's)")
    parser.add_argument("--report", metavar="FILE",
                        help="at exit, write what the runtime did in every process of the program to FILE (JSON; "
                             "a page to look at, self-contained HTML, when FILE ends in .html) and print a summary "
                             "on stderr")
    parser.add_argument("--output", metavar="PATH", help="a notebook: where the executed notebook goes "
                        "(default: NAME.nbconvert.ipynb beside it, as `jupyter nbconvert --execute` writes it)")
    parser.add_argument("--inplace", action="store_true", help="a notebook: write the executed notebook over it")
    parser.add_argument("-m", dest="run_module", nargs=argparse.REMAINDER, metavar="MODULE [ARGS...]",
                        help="run library module MODULE as a script, with its arguments")
    parser.add_argument("program", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]",
                        help="the script (or a directory or zip file with a __main__.py) and its arguments")


def run(args: argparse.Namespace) -> int:
    module = args.run_module
    if not (module or args.program):
        print("torchdevice run: give a SCRIPT or -m MODULE", file=sys.stderr)
        return 2
    try:
        main = None if module else _main_of(os.path.abspath(args.program[0]))
    except Unrunnable as exc:
        print(f"torchdevice run: {exc}", file=sys.stderr)
        return exc.status
    notebook: tuple[str, Any] | None = None
    if main is not None and main[0].endswith(".ipynb"):
        loaded = _load_notebook(main[0], args)  # before the runtime: a bad notebook is said at once
        if isinstance(loaded, int):
            return loaded
        notebook = (main[0], loaded)
    if module:
        sys.path[0] = os.getcwd()
        if importlib.util.find_spec(module[0]) is None:
            print(f"torchdevice run: No module named {module[0]}", file=sys.stderr)
            return 1
    import torchdevice
    from torchdevice.runtime.activation import resolve_for

    with warnings.catch_warnings(record=True) as caught:  # no program line to point at yet: said plainly
        try:  # a bad TORCHDEVICE_TARGET is the user's input: one line, not a traceback
            target = resolve_for(args.target, args.gpu, args.gpu_memory, "--gpu and --gpu-memory")
        except (ValueError, RuntimeError) as exc:
            _say_warnings(caught, None)
            print(f"torchdevice run: {str(exc).removeprefix('torchdevice: ')}", file=sys.stderr)
            return 2
        torchdevice.install(target, devices=args.devices, gpu=args.gpu, gpu_memory=args.gpu_memory,
                            report=args.report)
    _say_warnings(caught, args.report)
    if notebook is not None:
        return _run_notebook(*notebook, args)
    if args.output or args.inplace:
        print("torchdevice run: --output and --inplace are for notebooks (.ipynb)", file=sys.stderr)
        return 2
    sys.argv = list(module or args.program)
    try:
        if main is None:
            runpy.run_module(module[0], run_name="__main__", alter_sys=True)  # argv[0]: the module's file
        else:
            _run_main(*main)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        hook = sys.excepthook  # the interpreter reports it through this hook, then dies by SIGINT
        sys.excepthook = lambda kind, value, tb: _report(value, hook)
        raise
    except BaseException as exc:  # noqa: BLE001 - reported as the interpreter would, then its exit status
        _report(exc, sys.excepthook)
        if target == "cuda-sim" and args.target is None and not os.environ.get("TORCHDEVICE_TARGET") \
                and "cuda" in str(exc).lower():
            print("torchdevice run: a GPU raises this too: without CUDA or MPS, \"cuda\" is a simulated GPU "
                  "(cuda-sim); --target cpu runs the program as the CPU allows", file=sys.stderr)
        return 1
    return 0


def _load_notebook(path: str, args: argparse.Namespace) -> Any:
    """The notebook to run (see :mod:`torchdevice.notebooks.execute`), else the exit status after saying why not."""
    from torchdevice.notebooks import MissingExtra
    from torchdevice.notebooks.execute import load
    from torchdevice.source.files import Unreadable

    if len(args.program) > 1 or args.output and args.inplace:
        print(f"torchdevice run: {'a notebook takes no arguments' if len(args.program) > 1 else ''}"
              f"{'give --output or --inplace, not both' if args.output and args.inplace else ''}", file=sys.stderr)
        return 2
    try:
        return load(Path(path))
    except (MissingExtra, Unreadable) as exc:
        print(f"torchdevice run: {exc}", file=sys.stderr)
        return 1


def _run_notebook(path: str, notebook: Any, args: argparse.Namespace) -> int:
    """Run a notebook's cells through a Jupyter kernel under the runtime installed here; 1 with the failing cell's
    number and traceback when one fails."""
    from torchdevice.notebooks.execute import CellFailed, default_output, execute

    shown = os.path.relpath(path)
    output = Path(path) if args.inplace else Path(args.output) if args.output else default_output(Path(path))
    try:
        cells = execute(notebook, Path(path), output)
    except CellFailed as exc:
        print(f"torchdevice run: {shown}: cell {exc.cell} failed (the notebook as run so far: {output}):\n{exc}",
              file=sys.stderr)
        return 1
    print(f"torchdevice run: {shown}: {cells} code cells run; written to {output}", file=sys.stderr)
    return 0


def _report(exc: BaseException, hook: Callable[..., object]) -> None:
    """Report ``exc`` through ``hook`` (an excepthook), with the program's frames only."""
    tb = _program_frames(exc.__traceback__)
    hook(type(exc), exc.with_traceback(tb), tb)


class Unrunnable(Exception):
    """There is nothing to run at the path given; ``status`` is the exit status Python gives for it."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _main_of(path: str) -> tuple[str, importlib.machinery.ModuleSpec | None]:
    """``(path, spec)`` of what ``python path`` runs as ``__main__`` (``spec``: None for a plain script), with
    ``sys.path[0]`` set as Python sets it."""
    importer = pkgutil.get_importer(path)  # a directory or a zip file
    if importer is None:
        if not os.path.isfile(path):
            raise Unrunnable(f"can't open file {path!r}: [Errno 2] No such file or directory", 2)
        sys.path[0] = os.path.dirname(path)
        return path, None
    spec = importer.find_spec("__main__")  # type: ignore[union-attr]
    if spec is None:
        raise Unrunnable(f"can't find '__main__' module in {path!r}", 1)
    sys.path[0] = path
    return path, spec


def _run_main(path: str, spec: importlib.machinery.ModuleSpec | None) -> None:
    """Execute ``path`` (a script, or with ``spec`` the ``__main__`` of a directory or zip file) as the
    ``__main__`` module, as ``python path`` does (``sys.argv`` as is)."""
    main = types.ModuleType("__main__")
    if spec is None:
        with io.open_code(path) as source:
            code = compile(source.read(), path, "exec")
        main.__file__ = path
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    else:
        assert spec.loader is not None and spec.origin is not None
        code = spec.loader.get_code("__main__")  # type: ignore[attr-defined]
        main.__file__, main.__loader__, main.__spec__, main.__package__ = spec.origin, spec.loader, spec, ""
    vars(main)["__builtins__"] = builtins
    sys.modules["__main__"] = main
    exec(code, vars(main))


def _program_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the program's first frame on: every frame up to the last of this module's, and
    runpy's right after it, dropped."""
    start, entry = tb, tb
    while entry is not None:
        if entry.tb_frame.f_globals.get("__name__") == __name__:
            start = entry.tb_next
        entry = entry.tb_next
    while start is not None and start.tb_next is not None and start.tb_frame.f_globals.get("__name__") in _OWN_MODULES:
        start = start.tb_next
    return start


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, not {text!r}")
    return int(text)


def _say_warnings(caught: list[warnings.WarningMessage], report: str | None) -> None:
    """The warnings of choosing and installing the target, each on a line of its own (and in the report)."""
    for warning in caught:
        text = f"{warning.category.__name__}: {str(warning.message).removeprefix('torchdevice: ')}"
        print(f"torchdevice run: {text}", file=sys.stderr)
        if report:
            from torchdevice.reporting import program as program_report

            program_report.note_warning(text)
