"""``torchdevice check`` and ``torchdevice rewrite`` given notebooks and folders holding them, from the command line:
findings and notes named by cell, per-cell diffs, exit statuses, a bad notebook among good files; the package
imports none of Jupyter's packages, and a missing one is named with the extra that brings it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchdevice.notebooks import EXTRA, MissingExtra, require

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "colab_train.ipynb"


def torchdevice(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchdevice", *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


@pytest.mark.processes
def test_check_finds_the_cuda_lines_of_a_folder_s_notebooks_by_cell(tmp_path):
    shutil.copy(EXAMPLE, tmp_path / "colab.ipynb")
    done = torchdevice("check", ".", "--target", "cpu", "--show-info", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "colab.ipynb:cell 4:line 1:23: info 'cuda' means cpu: `cuda` stands for the target" in lines
    assert any(line.startswith("colab.ipynb:cell 5:line 4:") and ".cuda()" in line for line in lines)
    assert any(line.startswith("colab.ipynb:cell 6:line 9:") and "torch.cuda.synchronize" in line for line in lines)
    assert lines[-1].startswith("1 file checked for cpu")


@pytest.mark.processes
def test_rewrite_shows_per_cell_diffs_and_check_exits_1_until_written(tmp_path):
    path = tmp_path / "colab.ipynb"
    shutil.copy(EXAMPLE, path)
    diff = torchdevice("rewrite", "--diff", path)
    assert diff.returncode == 1, diff.stderr
    headers = [line for line in diff.stdout.splitlines() if line.startswith("--- ")]
    assert headers == [f"--- {path}:cell {n}" for n in (3, 4, 5, 6)]
    assert f"+++ {path}:cell 5\n" in diff.stdout and "-model = nn.Sequential" in diff.stdout
    assert torchdevice("rewrite", "--check", path).returncode == 1
    assert path.read_bytes() == EXAMPLE.read_bytes()
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"nbformat": 3}', encoding="utf-8")
    written = torchdevice("rewrite", "--write", tmp_path)
    assert written.returncode == 123  # the bad notebook; the good one is written all the same
    assert f"error: {bad}: not a notebook of nbformat 4 (version 3)" in written.stderr
    assert bad.read_text(encoding="utf-8") == '{"nbformat": 3}'
    assert torchdevice("rewrite", "--check", path).returncode == 0


@pytest.mark.processes
def test_importing_torchdevice_imports_no_jupyter_package():
    code = ("import sys, torchdevice\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('nbclient', 'nbformat', 'jupyter_client', 'ipykernel', 'IPython')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout == "[]\n", done.stderr


def test_a_missing_jupyter_package_is_named_with_the_extra():
    with pytest.raises(MissingExtra) as caught:
        require("nbclient_not_installed.client")
    assert str(caught.value) == f"notebooks need the package nbclient_not_installed, which is not installed: {EXTRA}"
    assert EXTRA == "pip install 'torchdevice-toolkit[notebook]'"
