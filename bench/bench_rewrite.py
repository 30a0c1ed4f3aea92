"""``torchdevice rewrite --check`` over the source tree of ``transformers`` (about 2,860 files).

The package is fetched once with ``pip download`` into ``.bench/`` (never installed); without a
network the benchmark reports itself skipped. Each run is a fresh ``python -m torchdevice rewrite``
process, timed wall-clock from start to exit. A ``--diff`` run adds what the rewrite does to the
tree: sites rewritten and reported, and lines added per rewritten site; ``cpu_transformers`` times the
rewriter alone, in this process. The lines added per site for tutorial-style programs (``examples/`` and the
end-to-end test programs: a GPT training loop, DDP recipes, a launcher of one process per GPU, streams and
events) need no download.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

PACKAGE = "transformers==5.23.0"
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench"
TUTORIALS = (ROOT / "examples", ROOT / "tests" / "rewrite" / "programs")
TREE = CACHE / PACKAGE.replace("==", "-")
_SUMMARY = re.compile(
    r"(\d+) files? scanned in [\d.]+s: (\d+) would be rewritten, (\d+) unchanged, (\d+) without CUDA code, "
    r"(\d+) skipped, (\d+) failed; (\d+) sites rewritten, (\d+) reported"
)


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


def check(tree: Path, jobs: int, mode: str = "--check") -> dict:
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "torchdevice", "rewrite", mode, "--jobs", str(jobs), str(tree)],
        capture_output=True, text=True,
    )
    seconds = time.perf_counter() - start
    found = _SUMMARY.search(result.stderr)
    if result.returncode not in (0, 1) or found is None:
        raise RuntimeError(f"rewrite failed ({result.returncode}): {result.stderr[-2000:]}")
    files, changed, unchanged, clean, skipped, failed, sites, reported = map(int, found.groups())
    row = {"seconds": round(seconds, 3), "files": files, "parsed": changed + unchanged, "would_change": changed,
           "skipped": skipped, "failed": failed, "sites": sites, "reported": reported}
    if mode == "--diff":
        changes = [line for line in result.stdout.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        added = sum(1 if line[0] == "+" else -1 for line in changes)
        row.update(lines_added=added, lines_per_site=round(added / max(sites, 1), 3))
    return row


def tutorials() -> dict:
    """Sites rewritten and lines added over the tutorial-style programs, in this process."""
    from torchdevice.rewrite.ruleset import default
    from torchdevice.rewrite.source import rewrite_source
    from torchdevice.source.parsing import split_lines

    files = sorted(p for folder in TUTORIALS for p in folder.glob("*.py"))
    sites = added = 0
    for path in files:
        source = path.read_text(encoding="utf-8")
        result = rewrite_source(source, default())
        sites += sum(result.sites.values())
        added += len(split_lines(result.code)) - len(split_lines(source))
    per_site = round(added / max(sites, 1), 3)
    return {"files": len(files), "sites": sites, "lines_added": added, "lines_per_site": per_site}


def cpu(tree: Path, repeat: int = 3) -> dict:
    """CPU seconds of rewriting the files of ``tree`` that mention CUDA, in this process, best of ``repeat``: the
    rewriter alone (no start-up, no file walk), and less sensitive to a busy machine than wall-clock runs."""
    from torchdevice.rewrite.ruleset import default
    from torchdevice.rewrite.source import rewrite_source

    rules = default()
    sources = [p.read_text(encoding="utf-8") for p in sorted(tree.rglob("*.py")) if rules.may_apply(p.read_bytes())]
    times = []
    for _ in range(repeat):
        start = time.process_time()
        for source in sources:
            rewrite_source(source, rules)
        times.append(round(time.process_time() - start, 3))
    return {"files": len(sources), "cpu_seconds": min(times), "all_cpu_seconds": times}


def run():
    yield {"name": "diff_tutorials", **tutorials()}
    tree = source_tree()
    if tree is None:
        yield {"name": "check_transformers", "skipped": f"{PACKAGE} could not be downloaded"}
        return
    yield {"name": "cpu_transformers", **cpu(tree), "package": PACKAGE}
    for jobs, repeat in ((2, 3), (1, 1)):
        runs = [check(tree, jobs) for _ in range(repeat)]
        best = min(runs, key=lambda r: r["seconds"])
        yield {"name": f"check_transformers_jobs{jobs}", **best, "all_seconds": [r["seconds"] for r in runs],
               "package": PACKAGE}
    yield {"name": "diff_transformers", **check(tree, 2, "--diff"), "package": PACKAGE}
