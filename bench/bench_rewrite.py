"""``torchdevice rewrite --check`` over the source tree of ``transformers`` (about 2,860 files).

The package is fetched once with ``pip download`` into ``.bench/`` (never installed); without a
network the benchmark reports itself skipped. Each run is a fresh ``python -m torchdevice rewrite``
process, timed wall-clock from start to exit.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

PACKAGE = "transformers==5.23.0"
CACHE = Path(__file__).resolve().parent.parent / ".bench"
TREE = CACHE / PACKAGE.replace("==", "-")
_SUMMARY = re.compile(r"(\d+) files? scanned in [\d.]+s: (\d+) would be rewritten, (\d+) unchanged, (\d+) skipped")


def source_tree() -> Path | None:
    """The unpacked package (``.bench/transformers-X/transformers``), fetched if missing; None when offline."""
    target = TREE / "transformers"
    if target.is_dir():
        return target
    wheels = CACHE / "wheels"
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", PACKAGE, "-d", str(wheels)],
        capture_output=True, text=True,
    )
    wheel = next(iter(sorted(wheels.glob("transformers-*.whl"))), None)
    if fetched.returncode != 0 or wheel is None:
        print(f"bench_rewrite: skipped, cannot download {PACKAGE}: {fetched.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(TREE, [n for n in archive.namelist() if n.startswith("transformers/")])
    return target


def check(tree: Path, jobs: int) -> dict:
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "torchdevice", "rewrite", "--check", "--jobs", str(jobs), str(tree)],
        capture_output=True, text=True,
    )
    seconds = time.perf_counter() - start
    found = _SUMMARY.search(result.stderr)
    if result.returncode not in (0, 1) or found is None:
        raise RuntimeError(f"rewrite failed ({result.returncode}): {result.stderr[-2000:]}")
    files, changed, unchanged, skipped = map(int, found.groups())
    return {"seconds": round(seconds, 3), "files": files, "parsed": changed + unchanged, "would_change": changed}


def run():
    tree = source_tree()
    if tree is None:
        yield {"name": "check_transformers", "skipped": f"{PACKAGE} could not be downloaded"}
        return
    for jobs, repeat in ((2, 3), (1, 1)):
        runs = [check(tree, jobs) for _ in range(repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        yield {"name": f"check_transformers_jobs{jobs}", **best, "all_seconds": [r["seconds"] for r in runs],
               "package": PACKAGE}
