"""``make status`` records per-entry outcomes of the generated tests; it never invents a verdict."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from codegen.status import merge

PROBE = """\
import pytest

STATUS_FIELD = "mlx"


@pytest.mark.parametrize("value", [
    pytest.param(1, id="torch.good"),
    pytest.param(2, id="torch.bad"),
    pytest.param(3, id="torch.skipped", marks=pytest.mark.skip(reason="not here")),
])
def test_op(value):
    assert value != 2
"""


@pytest.mark.processes
def test_record_writes_pass_and_fail_and_keeps_other_fields(tmp_path: Path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    status_file = tmp_path / "status.yaml"
    status_file.write_text("torch.good: {cuda: fail, mlx: fail}\ntorch.gone: {mlx: pass}\n")
    script = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from codegen.status import record
        sys.exit(record([{str(tmp_path)!r}, "-n", "2"], Path({str(status_file)!r})))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    status = yaml.safe_load(status_file.read_text())
    assert status["torch.good"] == {"mlx": "pass", "cuda": "fail"}
    assert status["torch.bad"] == {"mlx": "fail"}
    assert "torch.skipped" not in status
    assert "torch.gone" not in status  # its mlx field was re-measured by this run and found nothing


def test_merge_is_sorted_and_deterministic():
    results = {("mlx", "torch.b"): "pass", ("cpu", "torch.a"): "pass", ("mlx", "torch.a"): "fail"}
    merged = merge({"torch.a": {"mps": "pass", "resolves": "pass"}}, results)  # a field no longer measured: dropped
    assert list(merged) == ["torch.a", "torch.b"]
    assert list(merged["torch.a"]) == ["cpu", "mlx", "mps"]
    assert merge({"torch.a": {"mps": "pass"}}, dict(reversed(list(results.items())))) == merged
