"""Run benchmarks side by side and print machine-readable results.

Each ``bench/bench_<topic>.py`` module defines ``run() -> Iterable[dict]``; every dict is printed as
one JSON line (``{"bench": ..., "name": ..., ...}``) and all of them are written to
``.bench/results.json``. ``python -m bench TOPIC...`` runs only the named topics;
``--record FILE`` also writes them into the documentation's results (``docs/measurements/bench.json``:
``bench/record.py``), in place of that file's results of the same topics.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def topics() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("topics", nargs="*", metavar="TOPIC")
    parser.add_argument("--record", metavar="FILE", type=Path,
                        help="also write the results into this document (docs/measurements/bench.json)")
    parser.add_argument("--machine", help="with --record: where the figures are measured")
    args = parser.parse_args(argv)
    chosen = args.topics or topics()
    unknown = sorted(set(chosen) - set(topics()))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(topics())}", file=sys.stderr)
        return 2
    results = []
    for topic in chosen:
        for result in importlib.import_module(f"bench.bench_{topic}").run():
            result = {"bench": topic, **result}
            print(json.dumps(result), flush=True)
            results.append(result)
    out = HERE.parent / ".bench" / "results.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    if args.record:
        from bench.record import record

        record(args.record, results, chosen, machine=args.machine)
    return 0


sys.exit(main(sys.argv[1:]))
