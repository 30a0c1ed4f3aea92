"""``torchdevice probe [--target mps|mps-sim] [--json FILE] [--all]``: measure MPS's column of the tables here.

On a Mac it calls, on the MPS device, every overload the fallback table says MPS has no kernel for and every
limit's probe (:mod:`torchdevice.device.probes`), and compares what happens with the tables for this torch and
this macOS: each is confirmed, contradicted (what happened instead) or not probed (why). ``--target mps-sim``
probes the simulated Mac (whose answers must be the tables' exactly), on the macOS version
``$TORCHDEVICE_MACOS`` names. Exit status 0: nothing contradicted; 1: something was; 2: no such device here.
Nothing of the runtime is installed: the device's own kernels answer.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", choices=("mps", "mps-sim"), default="mps",
                        help="the device probed: MPS (on a Mac) or the simulated Mac (default: mps)")
    parser.add_argument("--json", metavar="FILE", type=Path, help="also write every outcome to FILE as JSON")
    parser.add_argument("--all", action="store_true", help="print every outcome, not only the contradicted")


def run(args: argparse.Namespace) -> int:
    import torch

    from torchdevice.device import limits
    from torchdevice.patching import Patcher

    patcher = Patcher()
    if args.target == "mps":
        if not torch.backends.mps.is_available():
            print("torchdevice: MPS is not available on this machine; `--target mps-sim` probes the simulated Mac",
                  file=sys.stderr)
            return 2
        device = torch.device("mps")
    else:
        from torchdevice.device.target import SIMULATED_MPS
        from torchdevice.simulated import activate

        device = activate(patcher, SIMULATED_MPS).device
    try:
        found = measure(device, limits.macos())
    finally:
        patcher.restore()
    found["target"] = args.target
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    print(report(found, every=args.all))
    return 1 if any(o["verdict"] == "contradicted" for o in found["outcomes"]) else 0


def measure(device: Any, macos: tuple[int, int], missing: Iterable[str] | None = None) -> dict[str, Any]:
    """Every probe on ``device`` for macOS ``macos`` (``missing``: the overloads probed for a missing kernel;
    default: the fallback table's), as one JSON-ready record."""
    import dataclasses

    import torch
    import torchdevice_generated

    from torchdevice.device import probes

    outcomes = probes.probe_limits(device, macos) + probes.probe_missing(device, missing)
    return {
        "torch": torch.__version__, "tables_torch": torchdevice_generated.TORCH_VERSION,
        "macos": ".".join(map(str, macos)), "machine": platform.platform(), "device": str(device),
        "outcomes": [dataclasses.asdict(o) for o in outcomes],
    }


def report(found: dict[str, Any], every: bool = False) -> str:
    """The summary per table, then the contradicted outcomes (``every``: all of them)."""
    lines = [f"torchdevice probe: {found['target']} ({found['device']}) on macOS {found['macos']}, torch "
             f"{found['torch']} (tables of torch {found['tables_torch']})"]
    for kind, title in (("limit", "limits"), ("missing", "missing kernels")):
        outcomes = [o for o in found["outcomes"] if o["kind"] == kind]
        counts = {v: sum(o["verdict"] == v for o in outcomes) for v in ("confirmed", "contradicted", "not probed")}
        lines.append(f"{title}: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
        for o in outcomes:
            if every or o["verdict"] == "contradicted":
                detail = o["observed"] if o["verdict"] == "not probed" else f"expected {o['expected']}; {o['observed']}"
                lines.append(f"  {o['verdict']:<13} {o['subject']}: {detail}")
    return "\n".join(lines)
