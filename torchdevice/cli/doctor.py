"""``torchdevice doctor [--json]``: what this machine offers and what the runtime would do on it.

Everything comes from torch itself and the generated tables (``torchdevice_generated``); no catalog
YAML is read.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    found = facts()
    print(json.dumps(found, indent=2) if args.json else format_facts(found))
    return 1 if found["target_error"] else 0


def facts() -> dict[str, Any]:
    """Devices present, the target ``"cuda"`` would mean, the catalog's torch version, the runtime's
    tables and what would fall back."""
    import torch
    import torchdevice_generated
    from torchdevice_generated import cuda_table, device_wrappers, fallback_table

    from torchdevice import releases
    from torchdevice.device.target import SIMULATED_MPS
    from torchdevice.runtime.activation import cuda_devices, resolve

    try:
        target, error = resolve(), None
    except (ValueError, RuntimeError) as exc:  # a bad TORCHDEVICE_TARGET: reported, the rest still shown
        target, error = None, str(exc).removeprefix("torchdevice: ")
    kind = None if target is None else "mps" if target == SIMULATED_MPS else target
    policies: dict[str, int] = {}
    for row in cuda_table.EMULATION:
        policies[row.policy] = policies.get(row.policy, 0) + 1
    return {
        "torchdevice": _version(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "catalog_torch": torchdevice_generated.TORCH_VERSION,
        "torch_facts": releases.facts(),
        "simulated_backend": _backend(),
        "devices": {
            "cuda": cuda_devices(),
            "mps": torch.backends.mps.is_available(),
            "cpu": os.cpu_count() or 1,
            "mlx": importlib.util.find_spec("mlx") is not None,
        },
        "target": "mps:0" if target == SIMULATED_MPS else target,  # the device "cuda" means
        "simulated": target == SIMULATED_MPS,
        "target_from": "TORCHDEVICE_TARGET" if os.environ.get("TORCHDEVICE_TARGET") else "machine",
        "target_error": error,
        "passthrough": target == "cuda",
        "wrapped_entry_points": len(device_wrappers.WRAPPERS),
        "torch_cuda_entries": dict(sorted(policies.items())),
        "fallback": None if kind is None else _fallback(kind, fallback_table),
        "float64": None if kind != "mps" else
        "float64 and complex128 tensors on the device are kept by the host (MPS has none)",
        "standins": _standins(),
    }


def _backend() -> str:
    """The simulated devices' backend here: compiled (built now where it is not yet), or why not."""
    from torchdevice.simulated import backend

    return "compiled" if backend.loadable() else f"not usable: {backend.why_not()}"


def _standins() -> dict[str, dict[str, Any]]:
    """Per stood-in package: whether the real one is installed (then it is used) or the stand-in would be."""
    from torchdevice_generated.standins import COVERED, PACKAGES, VERSIONS

    out = {}
    for name, (distribution, _) in PACKAGES.items():
        real = importlib.util.find_spec(name) is not None
        out[name] = {"distribution": distribution, "uses": "installed package" if real else "stand-in",
                     "follows": VERSIONS[name], "covered": sorted(n for n in COVERED if n.split(".")[0] == name)}
    return out


def _fallback(target: str, table: Any) -> dict[str, Any]:
    """What the fallback engine would route elsewhere on ``target``."""
    if target != "mps":
        return {"active": False, "why": f"every op has a kernel on {target}"}
    return {
        "active": True,
        "missing_on_mps": len(table.MISSING_ON_MPS),
        "watched_on_mps": len(table.TRY_ON_MPS),
        "with_mlx_shim": len(table.MLX_ROUTES),
        "examples": sorted(table.MISSING_ON_MPS)[:10],
    }


def _version() -> str:
    import torchdevice

    return torchdevice.__version__


def format_facts(f: dict[str, Any]) -> str:
    d = f["devices"]
    meaning = "cuda itself (passthrough: nothing is patched)" if f["passthrough"] else f["target"]
    if f["simulated"]:
        meaning += " (simulated Apple silicon: MPS's kernel table and dtypes on this machine's CPU, not its speed)"
    lines = [
        f"torchdevice {f['torchdevice']}  python {f['python']}  torch {f['torch']}  "
        f"(catalog: torch {f['catalog_torch']})",
        f"facts: {f['torch_facts']}",
        f"simulated devices' backend: {f['simulated_backend']}",
        "devices:",
        f"  cuda  {d['cuda'] or 'not available'}",
        f"  mps   {'available' if d['mps'] else 'not available'}",
        f"  cpu   {d['cpu']} cores",
        f"  mlx   {'installed' if d['mlx'] else 'not installed'}",
        f"target: error: {f['target_error']}" if f["target_error"]
        else f"target: \"cuda\" means {meaning} (chosen by {f['target_from']})",
        f"runtime: {f['wrapped_entry_points']} device entry points wrapped; torch.cuda entries: "
        + ", ".join(f"{n} {policy}" for policy, n in f["torch_cuda_entries"].items()),
    ]
    fb = f["fallback"]
    if fb is None:
        pass
    elif fb["active"]:
        lines.append(f"fallback: {fb['missing_on_mps']} aten overloads have no MPS kernel, "
                     f"{fb['watched_on_mps']} are watched; {fb['with_mlx_shim']} can run on MLX, the rest on CPU")
        lines += [f"  {name}" for name in fb["examples"]]
    else:
        lines.append(f"fallback: none ({fb['why']})")
    if f["float64"]:
        lines.append(f"float64: {f['float64']}")
    lines.append("stand-ins under the runtime (torchdevice.report()['standins'] lists those a run used):")
    width = max((len(name) for name in f["standins"]), default=0) + 1
    for name, standin in f["standins"].items():
        uses = standin["uses"] if standin["uses"] != "stand-in" else \
            f"stand-in ({standin['distribution']} {standin['follows']} API, {len(standin['covered'])} names)"
        lines.append(f"  {name:<{width}}{uses}")
    return "\n".join(lines)
