"""What the start-up hook (``torchdevice.pth``, ``_torchdevice_startup``) costs a Python process, in fresh interpreters.

- a process that never imports torch, started with ``TORCHDEVICE_INSTALL`` (as every process a
  redirected program starts is) vs without it: wall time of ``python -c pass``, medians of
  interleaved runs, and the hook module's own import time (``-X importtime``);
- the ``.pth`` line in a process without the variable: one environment look-up, timed in process;
- a process that imports torch: the installation the hook makes vs ``import torchdevice;
  torchdevice.install()`` written in the program, and the finder's cost while torch imports its modules.

Bytecode caching is on for these interpreters (as where users run them), whatever this one has.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_") and k != "PYTHONDONTWRITEBYTECODE"}
HOOKED = {**ENV, "TORCHDEVICE_INSTALL": "target=cpu"}

# Both time only the installation (torchdevice's import included), in CPU time: on a shared machine the load
# of other processes swamps a difference of milliseconds in wall time, and import torch's own variance
# (tens of ms) swamps it in a comparison of whole imports.
HOOK_INSTALL = ("import time, _torchdevice_startup as hook\n"
                "def timed():\n    s = time.process_time(); install(); print(time.process_time() - s)\n"
                "install, hook._install = hook._install, timed\nimport torch")
EXPLICIT_INSTALL = ("import time, torch; s = time.process_time(); import torchdevice; torchdevice.install('cpu'); "
                    "print(time.process_time() - s)")
FINDER_LOOKUPS = ("import sys, timeit, _torchdevice_startup as hook; finder = hook.TorchImport(); "
                  "before = len(sys.modules); import torch; imported = len(sys.modules) - before; "
                  "print(imported * min(timeit.repeat(lambda: finder.find_spec('torch.nn'), number=10000, repeat=5)) "
                  "/ 10000)")


def wall(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def no_torch() -> Iterator[dict[str, Any]]:
    """``python -c pass`` with and without the variable, and the hook module's import time."""
    wall(HOOKED)  # write the bytecode caches
    plain, hooked = [], []
    for _ in range(40):
        plain.append(wall(ENV))
        hooked.append(wall(HOOKED))
    base, cand = statistics.median(plain), statistics.median(hooked)
    yield {"name": "python -c pass: TORCHDEVICE_INSTALL set vs unset (never imports torch)", "candidate_s": cand,
           "baseline_s": base, "added_ms": (cand - base) * 1e3, "target_added_ms": 2}
    own = []
    for _ in range(15):
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=HOOKED, capture_output=True,
                             text=True, check=True).stderr
        found = re.search(r"\|\s+(\d+) \|\s+_torchdevice_startup$", out, re.MULTILINE)
        assert found, out
        own.append(int(found.group(1)) / 1e3)
    yield {"name": "import of _torchdevice_startup (cumulative, -X importtime)", "added_ms": statistics.median(own),
           "target_added_ms": 2}
    line = (ROOT / "torchdevice.pth").read_text().strip()
    namespace: dict[str, Any] = {}
    os.environ.pop("TORCHDEVICE_INSTALL", None)
    seconds = min(timeit.repeat(lambda: exec(line, namespace), number=10_000, repeat=5)) / 10_000
    yield {"name": "torchdevice.pth line without TORCHDEVICE_INSTALL (in process)", "added_ms": seconds * 1e3,
           "target_added_ms": 2}


def with_torch() -> Iterator[dict[str, Any]]:
    """The installation the hook makes when torch is imported vs ``import torchdevice; install()`` written in the
    program after ``import torch`` (medians of fresh interpreters), and what the finder adds to ``import torch``."""

    def seconds(code: str, env: dict[str, str]) -> float:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])

    seconds(EXPLICIT_INSTALL, ENV)  # warm the file system cache and bytecode
    hooked, explicit = [], []
    for _ in range(9):
        hooked.append(seconds(HOOK_INSTALL, HOOKED))
        explicit.append(seconds(EXPLICIT_INSTALL, ENV))
    hook, install = statistics.median(hooked), statistics.median(explicit)
    yield {"name": "installation by the hook at import torch vs torchdevice.install() after import torch",
           "candidate_s": hook, "baseline_s": install, "ratio": hook / install, "target_ratio": 1.0}
    yield {"name": "the hook's finder, asked for each module import torch imports", "added_ms":
           seconds(FINDER_LOOKUPS, ENV) * 1e3, "target_added_ms": 2}


def run() -> Iterator[dict[str, Any]]:
    yield from no_torch()
    yield from with_torch()
