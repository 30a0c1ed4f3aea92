"""Run benchmarks side by side and print machine-readable results.

Each ``bench/bench_<topic>.py`` module defines ``run() -> Iterable[dict]``; every dict is printed as
one JSON line (``{"bench": ..., "name": ..., ...}``) and all of them are written to
``.bench/results.json``. ``python -m bench TOPIC...`` runs only the named topics.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def topics() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    chosen = argv or topics()
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
    return 0


sys.exit(main(sys.argv[1:]))
