"""``torchdevice catalog stats [--json]`` and ``torchdevice catalog show NAME``."""

from __future__ import annotations

import argparse
import json
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    stats = sub.add_parser("stats", help="counts by namespace, kind, category, policy and kernel status")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    show = sub.add_parser("show", help="print one entry")
    show.add_argument("name", help="qualified name, e.g. torch.zeros or torch.Tensor.to")


def run(args: argparse.Namespace) -> int:
    from codegen.load import load
    from codegen.schema import CatalogError

    try:
        catalog = load()
    except CatalogError as exc:
        print(f"torchdevice: {exc}", file=sys.stderr)
        return 2
    if args.action == "stats":
        stats = catalog.stats()
        print(json.dumps(stats, indent=2) if args.json else format_stats(stats))
        return 0
    if args.name not in catalog:
        close = sorted(n for n in catalog.by_name if n.endswith("." + args.name.rpartition(".")[2]))[:10]
        hint = f"; did you mean: {', '.join(close)}" if close else ""
        print(f"torchdevice: no catalog entry {args.name!r}{hint}", file=sys.stderr)
        return 1
    print(format_entry(catalog[args.name]))
    return 0


def format_stats(stats: dict) -> str:
    lines = [
        f"torch {stats['torch_version']}: {stats['entries']} entries, {stats['resolved']} resolved, "
        f"{stats['mlx_mapped']} mapped to MLX ({stats['mlx_verified']} verified)",
    ]
    for key in ("by_kind", "by_policy", "by_category", "by_namespace"):
        lines.append(f"\n{key.removeprefix('by_')}:")
        lines += [f"  {name:<40} {count:>6}" for name, count in stats[key].items()]
    lines.append("\nkernels:")
    for backend, counts in stats["kernels"].items():
        lines.append(f"  {backend:<6} " + "  ".join(f"{k}={v}" for k, v in counts.items()))
    return "\n".join(lines)


def format_entry(entry) -> str:
    import dataclasses

    rows = [
        ("name", entry.name), ("kind", entry.kind), ("module", entry.module), ("category", entry.category),
        ("policy", entry.policy), ("device params", ", ".join(entry.device_params) or "-"),
        ("aten", ", ".join(entry.aten) or "-"),
        ("kernels", "  ".join(f"{b}={s}" for b, s in dataclasses.asdict(entry.kernels).items())),
        ("status", "  ".join(f"{b}={s or '-'}" for b, s in dataclasses.asdict(entry.status).items())),
    ]
    if entry.mlx is not None:
        rows.append(("mlx", f"{entry.mlx.mlx}  args={entry.mlx.args}"))
    if entry.overlays.cuda is not None:
        rows.append(("cuda", entry.overlays.cuda.does or "-"))
    rows += [("signature", s) for s in entry.signatures]
    return "\n".join(f"{k:<14} {v}" for k, v in rows)
