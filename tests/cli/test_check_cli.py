"""``torchdevice check`` from the command line, in a subprocess: linter lines, the grouped summary, JSON, exit
statuses, ``[tool.torchdevice]`` exclusions, files it cannot read."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

FIXTURES = Path(__file__).resolve().parents[1] / "check" / "fixtures"
LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<column>\d+): (?P<severity>blocker|warning|info) (?P<name>\S+) ")


def check(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchdevice", "check", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_blockers_are_linter_lines_then_a_grouped_summary_and_exit_1():
    done = check(FIXTURES / "blockers.py")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    flagged = [LINE.match(line) for line in lines if LINE.match(line)]
    source = (FIXTURES / "blockers.py").read_text().splitlines()
    for m in flagged:  # each line names a place that says what it expects there
        assert f"# expect: {m['severity']} {m['name']}" in source[int(m["line"]) - 1], m.string
    assert lines[len(flagged)].startswith("blockers (")
    assert re.fullmatch(r"1 file checked for mps in \d+\.\ds: \d+ blockers, \d+ warnings, \d+ info; "
                        r"0 unreadable, 0 skipped", lines[-1])


def test_nothing_blocking_exits_0_and_json_holds_every_finding():
    done = check(FIXTURES / "guarded.py", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["target"] == "mps" and document["counts"]["blocker"] == 0
    findings = document["findings"]
    assert {"path", "line", "column", "name", "severity", "message", "todo"} <= set(findings[0])
    assert sum(f["severity"] == "info" for f in findings) == document["counts"]["info"] > 0


def test_usage_errors_exit_2_with_one_line():
    missing = check(FIXTURES / "nothing-here.py")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nothing-here.py" in missing.stderr
    target = check(FIXTURES, "--target", "tpu")
    assert target.returncode == 2 and "invalid choice: 'tpu'" in target.stderr


def test_project_configuration_excludes_files_and_a_broken_file_is_reported(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice]\nexclude = ["vendor"]\n')
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "kernels.py").write_text("import cupy\n")
    (tmp_path / "train.py").write_text("import torch\nx = torch.zeros(1, device='cuda')\n")
    assert check(tmp_path).returncode == 0
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n    torch.cuda.synchronize()\n")
    done = check(tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [f"error: {tmp_path / 'broken.py'}:2: syntax error: invalid syntax"]
    assert done.stdout.splitlines()[-1].endswith("1 unreadable, 0 skipped")
