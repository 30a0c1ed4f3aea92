"""The own test suites of libraries this project did not write, run natively and under ``torchdevice run``.

``python tests/external/suites.py [SUITE...] [-n JOBS] [--target NAME] [--plugin]`` (``make external-suites``).
For each suite the sdist of the installed release is fetched with pip into ``.external/`` (the test sources ship
in it) and the chosen tests run twice with pytest: with plain torch, then as ``torchdevice run [--target
NAME] -m pytest`` (with ``--plugin``: as ``pytest --torchdevice[=NAME]``, the pytest plugin), each writing JUnit
XML. It prints, per suite, how many passed each way and every test whose outcome differs, and writes everything
to ``.external/results.json``. Not part of ``make test``: it takes tens of minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / ".external"


@dataclass(frozen=True)
class Suite:
    distribution: str  # the PyPI name; the installed release's sdist is fetched
    tests: tuple[str, ...]  # pytest arguments, run from the unpacked sdist's root
    jobs: bool = True  # False: one pytest process (ignite's fixtures take an xdist worker's number for a rank)
    added: tuple[tuple[str, str], ...] = ()  # (path in the sdist, its text): test modules the sdist lacks


HERE = Path(__file__).resolve().parent
# The sdist's common model tester imports two modules the sdist leaves out; the mixins it takes from them
# add tests of torch.export and of generate(), which the suite goes without.
TRANSFORMERS_ADDED = (
    ("tests/__init__.py", ""), ("tests/exporters/__init__.py", ""), ("tests/generation/__init__.py", ""),
    ("tests/exporters/test_export.py", "class ExportTesterMixin:\n    pass\n"),
    ("tests/generation/test_utils.py", "class GenerationTesterMixin:\n    pass\n"),
    ("tests/test_architectures.py", (HERE / "transformers_models.py").read_text()),
)


SUITES = {
    "skorch": Suite("skorch", (
        "skorch/tests/test_utils.py", "skorch/tests/test_dataset.py", "skorch/tests/test_history.py",
        "-o", "addopts=")),
    "pytorch-ignite": Suite("pytorch-ignite", (
        "tests/ignite/distributed/utils/test_native.py", "tests/ignite/distributed/comp_models/test_native.py",
        "tests/ignite/distributed/test_auto.py", "tests/ignite/engine/test_create_supervised.py",
        "tests/ignite/test_utils.py", "tests/ignite/distributed/utils/test_serial.py",
        "tests/ignite/handlers/test_ema_handler.py", "tests/ignite/metrics/test_accumulation.py",
        *(f"tests/ignite/engine/test_deterministic.py::{test}" for test in (  # its others take minutes on the CPU
            "test__set_rng_states_cuda", "test_gradients_on_resume_on_cuda", "test_distrib_gloo_cpu_or_gpu",
            "test_distrib_nccl_gpu")), "-o", "addopts="), jobs=False),
    "accelerate": Suite("accelerate", (
        "tests/test_accelerator.py", "tests/test_utils.py", "tests/test_memory_utils.py",
        "tests/test_optimizer.py", "tests/test_kwargs_handlers.py", "tests/test_scheduler.py",
        "tests/test_grad_sync.py", "tests/test_data_loader.py", "tests/test_big_modeling.py",
        "tests/test_modeling_utils.py", "tests/test_hooks.py", "tests/test_compile.py",
        "tests/test_activation_checkpointing_offload.py", "tests/test_state_checkpointing.py", "-o", "addopts=")),
    "transformers": Suite("transformers", ("tests/test_architectures.py", "-o", "addopts="),
                          added=TRANSFORMERS_ADDED),
}


def unpacked(distribution: str) -> Path:
    """The installed release's sdist, fetched and unpacked under ``.external/`` once."""
    release = version(distribution)
    downloads = WORK / "sdists"
    archives = [p for p in downloads.glob("*.tar.gz") if _is_release(p.name, distribution, release)]
    if not archives:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "-d", str(downloads), f"{distribution}=={release}"], check=True)
        archives = [p for p in downloads.glob("*.tar.gz") if _is_release(p.name, distribution, release)]
    (archive,) = archives
    root = WORK / archive.name.removesuffix(".tar.gz")
    if not root.is_dir():
        with tarfile.open(archive) as tar:
            tar.extractall(WORK, filter="data")
    return root


def _is_release(name: str, distribution: str, release: str) -> bool:
    return name.lower().replace("_", "-") == f"{distribution}-{release}.tar.gz".lower()


def outcomes(report: Path) -> dict[str, str]:
    """``{test id: passed|failed|skipped}`` from a JUnit XML report."""
    found = {}
    for case in ET.parse(report).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        found[test] = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
    return found


def missing_modules(report: Path) -> dict[str, str]:
    """``{test id: module}`` for the tests of a JUnit XML report that failed on a module not installed."""
    found = {}
    for case in ET.parse(report).iter("testcase"):
        for failure in (child for child in case if child.tag in ("failure", "error")):
            missing = re.search(r"No module named '([\w.]+)'", f"{failure.get('message')}\n{failure.text}")
            if missing:
                found[f"{case.get('classname')}::{case.get('name')}"] = missing[1]
    return found


def run(suite: Suite, root: Path, runtime: list[str] | None, jobs: int, plugin: bool = False) -> tuple[Path, float]:
    """The suite's JUnit report and seconds, natively or (``runtime``: its arguments) as ``torchdevice run``, or
    with ``plugin`` as ``pytest --torchdevice`` (``runtime``: ``[]`` or ``["--target", NAME]``)."""
    for path, text in suite.added:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    report = root / ("native.xml" if runtime is None else "plugin.xml" if plugin else "runtime.xml")
    pytest = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", ".", f"--junitxml={report}", *suite.tests]
    if suite.jobs and jobs > 1:
        pytest += ["-n", str(jobs)]
    if plugin and runtime is not None:
        pytest.insert(2, "--torchdevice" + (f"={runtime[1]}" if runtime else ""))
    command = [sys.executable, *([] if runtime is None or plugin else ["-m", "torchdevice", "run", *runtime]), *pytest]
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("TORCHDEVICE_") or k == "TORCHDEVICE_BUILD_DIR"}
    environment["HF_HUB_OFFLINE"] = "1"  # tests that would download a model fail at once, both ways
    # the console scripts tests start (accelerate launch), as in an activated environment
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), environment.get("PATH", "")])
    start = time.monotonic()
    with open(report.with_suffix(".log"), "w") as log:
        subprocess.run(command, cwd=root, env=environment, stdout=log, stderr=subprocess.STDOUT, check=False)
    return report, time.monotonic() - start


def compare(name: str, jobs: int, target: str | None, plugin: bool = False) -> dict:
    suite = SUITES[name]
    root = unpacked(suite.distribution)
    native_report, native_s = run(suite, root, None, jobs)
    runtime_report, runtime_s = run(suite, root, [] if target is None else ["--target", target], jobs, plugin)
    native, runtime = outcomes(native_report), outcomes(runtime_report)
    differ = {test: {"native": native.get(test, "absent"), "runtime": runtime.get(test, "absent")}
              for test in sorted(native.keys() | runtime.keys()) if native.get(test) != runtime.get(test)}
    count = lambda found, kind: sum(outcome == kind for outcome in found.values())  # noqa: E731
    return {"suite": name, "release": version(suite.distribution), "target": target or "default",
            "via": "pytest --torchdevice" if plugin else "torchdevice run",
            "tests": len(native),
            "native": {k: count(native, k) for k in ("passed", "failed", "skipped")},
            "runtime": {k: count(runtime, k) for k in ("passed", "failed", "skipped")},
            "seconds": {"native": round(native_s), "runtime": round(runtime_s)},
            "lost": sorted(t for t, d in differ.items() if d["native"] == "passed"),
            "missing_modules": missing_modules(runtime_report),  # of the runtime's failures
            "differ": differ}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suites", nargs="*", metavar="SUITE", help=f"default: all of {', '.join(SUITES)}")
    parser.add_argument("-n", "--jobs", type=int, default=2, help="pytest-xdist workers per run (default 2)")
    parser.add_argument("--target", help="torchdevice run's --target (default: the runtime's default)")
    parser.add_argument("--plugin", action="store_true", help="run under the pytest plugin (pytest --torchdevice) "
                        "instead of torchdevice run -m pytest")
    args = parser.parse_args()
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        parser.error(f"unknown suite(s): {', '.join(unknown)}; available: {', '.join(SUITES)}")
    WORK.mkdir(exist_ok=True)
    results = []
    for name in args.suites or SUITES:
        result = compare(name, args.jobs, args.target, args.plugin)
        results.append(result)
        print(f"{name} {result['release']} (target {result['target']}, {result['via']}): {result['tests']} tests; "
              f"passed natively {result['native']['passed']}, "
              f"under the runtime {result['runtime']['passed']} (failed {result['runtime']['failed']}, "
              f"{len(result['missing_modules'])} of them on a missing module); {len(result['lost'])} passed natively "
              f"only; {result['seconds']['native']} s / {result['seconds']['runtime']} s", flush=True)
        for test, outcome in result["differ"].items():
            module = result["missing_modules"].get(test)
            print(f"  {test}: native {outcome['native']}, runtime {outcome['runtime']}"
                  + (f" (no module {module})" if module else ""))
    (WORK / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
