"""``python -m settled_exit PROGRAM ARGS...``: run PROGRAM as ``python PROGRAM ARGS...`` would, then end
the process without the interpreter's teardown.

torch 2.13's gloo backend can abort a finished program at interpreter exit ("terminate called
without an active exception", SIGABRT: a gloo thread releases a collective's tensors during
``Py_FinalizeEx``), in a few percent of runs, whatever the program did. Tests that run plain-torch
distributed programs (no torchdevice, which settles that itself) launch them through this module so
that only the program's own behaviour decides the outcome: its output and exit status are
unchanged; the teardown, where the upstream bug lives, is skipped once stdio is flushed.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback


def main() -> int:
    sys.argv = sys.argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:  # noqa: BLE001 - reported as the interpreter would
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
