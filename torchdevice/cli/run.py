"""``torchdevice run SCRIPT [ARGS...]`` and ``torchdevice run -m MODULE [ARGS...]``.

Runs the program as ``python SCRIPT ARGS`` (or ``python -m MODULE ARGS``) would, with the runtime
installed first: same ``sys.argv``, ``__main__``, ``sys.path[0]`` and exit status. An uncaught
exception is reported through ``sys.excepthook`` with the program's own frames only.
"""

from __future__ import annotations

import argparse
import builtins
import importlib.machinery
import importlib.util
import io
import os
import runpy
import sys
import types
from types import TracebackType

_OWN_MODULES = (__name__, "runpy")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = "torchdevice run [-h] (SCRIPT | -m MODULE) [ARGS...]"
    parser.add_argument("-m", dest="run_module", nargs=argparse.REMAINDER, metavar="MODULE [ARGS...]",
                        help="run library module MODULE as a script, with its arguments")
    parser.add_argument("program", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]",
                        help="the script and its arguments")


def run(args: argparse.Namespace) -> int:
    module = args.run_module
    if not (module or args.program):
        print("torchdevice run: give a SCRIPT or -m MODULE", file=sys.stderr)
        return 2
    sys.path[0] = os.getcwd() if module else os.path.dirname(os.path.abspath(args.program[0]))
    if module and importlib.util.find_spec(module[0]) is None:
        print(f"torchdevice run: No module named {module[0]}", file=sys.stderr)
        return 1
    if not module and not os.path.isfile(args.program[0]):
        path = os.path.abspath(args.program[0])
        print(f"torchdevice run: can't open file {path!r}: [Errno 2] No such file or directory", file=sys.stderr)
        return 2
    import torchdevice

    torchdevice.install()
    sys.argv = list(module or args.program)
    try:
        if module:
            runpy.run_module(module[0], run_name="__main__", alter_sys=True)  # argv[0]: the module's file
        else:
            _run_script(os.path.abspath(args.program[0]))
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported as the interpreter would, then its exit status
        tb = _program_frames(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def _run_script(path: str) -> None:
    """Execute the file at ``path`` as the ``__main__`` module, as ``python path`` does (``sys.argv`` as is)."""
    with io.open_code(path) as source:
        code = compile(source.read(), path, "exec")
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    vars(main)["__builtins__"] = builtins
    sys.modules["__main__"] = main
    exec(code, vars(main))


def _program_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the program's first frame on (this module's and runpy's frames dropped)."""
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_globals.get("__name__") in _OWN_MODULES:
        tb = tb.tb_next
    return tb
