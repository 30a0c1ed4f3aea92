"""The consistency tier: its target, and the pass rate over all samples."""

from __future__ import annotations

from collections import Counter

import pytest

_samples: Counter[str] = Counter()


@pytest.fixture
def target(request: pytest.FixtureRequest) -> str:
    """The target the tier installs (``--consistency-target``)."""
    return str(request.config.getoption("--consistency-target"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _samples.update({str(name): int(value) for name, value in report.user_properties})  # type: ignore[call-overload]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if _samples["samples"]:
        target = config.getoption("--consistency-target")
        terminalreporter.write_line(
            f"consistency on {target}: {_samples['passed']:,} of {_samples['samples']:,} samples match the CPU's "
            f"({100 * _samples['passed'] / _samples['samples']:.2f}%)")
