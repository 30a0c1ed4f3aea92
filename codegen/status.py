"""``make status``: run the per-entry tests (``tests/ops``) and record what they measured in ``catalog/status.yaml``.

Each per-entry test module names the :class:`~codegen.model.Status` field it measures in
``STATUS_FIELD`` and parametrizes with the entry's qualified name as the test id, or maps its
parameters to the entry with a ``status_entry(params)`` function. This module is also a pytest
plugin (``-p codegen.status``) that tags each report with ``(field, entry)``; the controlling
process folds the outcomes into the status file: ``pass`` when every test of an entry passed,
``fail`` when one failed or is an expected failure, nothing when all were skipped. Fields measured
elsewhere (cuda, mps on machines that have them) are kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from codegen.files import ROOT, STATUS_FILE
from codegen.model import MEASURED
from torchdevice import atomic

TAG = "torchdevice-status"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    module = getattr(item, "module", None)
    field = getattr(module, "STATUS_FIELD", None)
    callspec = getattr(item, "callspec", None)
    if field in MEASURED and callspec is not None:
        entry_of = getattr(module, "status_entry", None)
        entry = entry_of(callspec.params) if entry_of is not None else callspec.id
        outcome.get_result().user_properties.append((TAG, (field, entry)))


class Recorder:
    """Collects per-(field, entry) outcomes in the controlling process (xdist forwards reports)."""

    def __init__(self) -> None:
        self.results: dict[tuple[str, str], str] = {}

    def pytest_runtest_logreport(self, report) -> None:
        for key, value in report.user_properties:
            if key != TAG:
                continue
            field, entry = value
            if report.failed or hasattr(report, "wasxfail"):  # a known failure is no verified capability
                self.results[(field, entry)] = "fail"
            elif report.passed and report.when == "call":
                self.results.setdefault((field, entry), "pass")


def merge(existing: dict, results: dict[tuple[str, str], str]) -> dict:
    """Existing status with the measured fields replaced by this run's results (fields no longer measured
    anywhere dropped)."""
    measured_fields = {field for field, _ in results}
    merged: dict[str, dict[str, str]] = {}
    for name, fields in existing.items():
        kept = {f: v for f, v in fields.items() if f not in measured_fields and f in MEASURED}
        if kept:
            merged[name] = kept
    for (field, name), verdict in results.items():
        merged.setdefault(name, {})[field] = verdict
    return {name: dict(sorted(fields.items(), key=lambda kv: MEASURED.index(kv[0])))
            for name, fields in sorted(merged.items())}


def record(pytest_args: list[str], status_file: Path = STATUS_FILE) -> int:
    """Run pytest with ``pytest_args`` and fold the per-entry outcomes into ``status_file``."""
    recorder = Recorder()
    code = pytest.main(["-p", "codegen.status", "-q", "-p", "no:cacheprovider", *pytest_args], plugins=[recorder])
    if not recorder.results:
        print("no per-op results recorded; status file left unchanged", file=sys.stderr)
        return 1
    existing = yaml.safe_load(status_file.read_text()) if status_file.exists() else {}
    status = merge(existing or {}, recorder.results)
    header = "# @generated: measured by `make status` (the per-entry tests, tests/ops); do not edit.\n"
    atomic.write(status_file, header + yaml.safe_dump(status, sort_keys=False, width=1000))
    passed = sum(v == "pass" for v in recorder.results.values())
    print(f"recorded {len(recorder.results)} results ({passed} pass) in {status_file}")
    return 0 if code in (0, 1) else int(code)


if __name__ == "__main__":
    sys.exit(record([str(ROOT / "tests" / "ops"), str(ROOT / "tests" / "fallback" / "test_mlx_consistency.py"),
                     *sys.argv[1:]]))
