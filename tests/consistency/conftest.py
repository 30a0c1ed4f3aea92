"""The consistency tier: its target, and the pass rate over all samples (and with the expected failures)."""

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
    total, passed, expected = _samples["samples"], _samples["passed"], _samples["expected"]
    if total:
        target = config.getoption("--consistency-target")
        terminalreporter.write_line(
            f"consistency on {target}: {passed:,} of {total:,} samples match the CPU's ({100 * passed / total:.2f}%); "
            f"{expected:,} others fail as expected_failures.yaml expects "
            f"({100 * (passed + expected) / total:.2f}% match or fail as expected)")
