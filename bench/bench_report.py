"""What the program report (``torchdevice run --report``) costs.

- per call: nothing is added to redirected calls (the runtime counts them whether a report is asked for
  or not); each fallen-back call is timed and explained: the accounting (two clock reads and
  ``record_fallback``) timed alone, against the cheapest fallback call there is (``cummax`` of 8 floats on
  the simulated MPS target, through the CPU route);
- at exit: ``torchdevice run --report FILE prog.py`` vs ``torchdevice run prog.py`` for a program that
  starts 4 Python processes, in fresh interpreters, interleaved, medians of the CPU time of the whole
  process tree (on a shared machine, wall time mostly measures the other processes);
- the page (``--report FILE.html``): rendering the report of a long run of 16 processes, each with 200
  fallen-back overloads and 300 redirected functions, against writing it as JSON; the page's size.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from bench.timing import per_call
from torchdevice.fallback import Engine
from torchdevice.fallback.cache import CapabilityCache
from torchdevice.reporting import counts as report
from torchdevice.reporting import page, program
from torchdevice.simulated.kernels import SimulatedKernels
from torchdevice.simulated.profile import chosen

PROGRAM = """\
import subprocess, sys, torch
torch.zeros(8, device="cuda")
for _ in range(4):
    subprocess.run([sys.executable, "-c", "import torch; torch.zeros(8, device='cuda')"], check=True)
"""
ENV = {k: v for k, v in os.environ.items() if not k.startswith("TORCHDEVICE_")}


def accounting() -> Iterator[dict[str, Any]]:
    with SimulatedKernels(chosen(missing={"cummax"}, table_missing={"aten::cummax"})) as target:
        library = Engine(target, CapabilityCache(target.name, None)).install()
        x = torch.randn(8, device=target.device)
        try:
            fallback = per_call(lambda: torch.cummax(x, 0), number=2_000, repeat=5, timer=time.process_time)
        finally:
            library._destroy()
    clock = time.perf_counter

    def account() -> None:
        start = clock()
        report.record_fallback("aten::cummax", "cpu", clock() - start, "no MPS kernel")

    cost = per_call(account, number=20_000, repeat=5, timer=time.process_time)
    report.reset()
    yield {"name": "fallback accounting (clock + record_fallback) vs cheapest fallback call", "candidate_s": cost,
           "baseline_s": fallback, "share": cost / fallback, "target_share": 0.05}


def at_exit() -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as directory:
        program = Path(directory) / "prog.py"
        program.write_text(PROGRAM)
        plain = [sys.executable, "-m", "torchdevice", "run", str(program)]
        reported = [sys.executable, "-m", "torchdevice", "run", "--report", str(Path(directory) / "r.json"),
                    str(program)]

        def seconds(command: list[str]) -> float:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(command, check=True, capture_output=True, env=ENV)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

        seconds(plain)  # warm the file system cache and bytecode
        runs = [(seconds(plain), seconds(reported)) for _ in range(3)]
    without = statistics.median(r[0] for r in runs)
    with_report = statistics.median(r[1] for r in runs)
    yield {"name": "torchdevice run --report vs without, program of 5 processes (CPU time, medians)",
           "candidate_s": with_report, "baseline_s": without, "added_ms": (with_report - without) * 1e3,
           "target_added_ms": 100}


def rendering() -> Iterator[dict[str, Any]]:
    def entry(pid: int) -> dict[str, Any]:
        return {"pid": pid, "parent_pid": 1, "role": f"DataLoader worker {pid}", "command": "python train.py",
                "target": "mps", "seconds": 3600.0, "standins": {}, "warnings": [],
                "redirects": {f"torch.op_{i}": {"cuda->mps": 1000 + i} for i in range(300)},
                "fallbacks": [{"op": f"aten::op_{i}", "route": "cpu", "count": 50_000 + i, "seconds": i / 7,
                               "why": "no MPS kernel"} for i in range(200)]}

    document = program.merge(entry(0), [entry(pid) for pid in range(1, 16)])
    rendered = per_call(lambda: page.render(document), number=1, repeat=5, timer=time.process_time)
    dumped = per_call(lambda: json.dumps(document, indent=1), number=1, repeat=5, timer=time.process_time)
    yield {"name": "report page of 16 processes x 200 fallback rows + 300 redirected functions vs its JSON",
           "candidate_s": rendered, "baseline_s": dumped, "page_bytes": len(page.render(document).encode()),
           "json_bytes": len(json.dumps(document, indent=1).encode()), "target_s": 1.0}


def run() -> Iterator[dict[str, Any]]:
    yield from accounting()
    yield from at_exit()
    yield from rendering()
