"""The benchmark results the documentation shows: ``docs/measurements/bench.json``.

``python -m bench --record docs/measurements/bench.json [TOPIC...]`` (``make bench RECORD=1``) replaces that file's
results of the topics it ran with this run's and keeps the others; the site's Performance page is rendered from the
file when it is built (``docs/hooks.py``), so ``make docs`` never runs a benchmark. The document:

``machine``
    where the figures were measured (kept from the file unless ``--machine`` says otherwise);
``results``
    one result per row, as ``python -m bench`` prints it (``bench``, ``name`` and its figures), with ``command``
    (what reproduces it) and ``recorded`` (the date, and the torch it ran on). A row may also carry ``what`` (the
    row's title on the page), ``measured`` (the figures said in words, shown instead of the raw ones) and ``goal``;
    rows of this form were written once from the figures of an earlier README.
"""

from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def load(path: Path) -> dict[str, Any]:
    if path.exists():
        return json.loads(path.read_text())
    return {"machine": "", "results": []}


def record(path: Path, results: Iterable[dict[str, Any]], topics: Iterable[str], machine: str | None = None,
           torch_version: str | None = None) -> dict[str, Any]:
    """Write this run's results of ``topics`` into the document at ``path`` in place of that file's; return it."""
    document = load(path)
    ran = set(topics)
    stamp = f"{datetime.date.today().isoformat()}, torch {torch_version or _torch_version()}, {platform.machine()}"
    new = [{**r, "command": r.get("command", f"python -m bench {r['bench']}"), "recorded": stamp} for r in results]
    kept = [r for r in document["results"] if r["bench"] not in ran]
    order = [r["bench"] for r in document["results"]]
    document["results"] = sorted(kept + new,
                                 key=lambda r: order.index(r["bench"]) if r["bench"] in order else len(order))
    if machine is not None:
        document["machine"] = machine
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return document


def _torch_version() -> str:
    from importlib.metadata import version

    return version("torch")
