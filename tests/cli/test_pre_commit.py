"""The pre-commit hooks (``.pre-commit-hooks.yaml``), run by pre-commit itself on a git repository of CUDA code: the
hooks as a remote repository gives them (``language: python``: pre-commit installs this package into the hooks' own
environment), and the ``repo: local`` form that runs the commands of the environment the project has.

The hooks' environment gets this package built from a copy of the working tree, committed in a temporary repository
(what pre-commit clones, as it would clone the project's repository at a tag); its dependencies (torch, libcst...) are
this environment's, seen through ``PYTHONPATH``, so that pip finds them installed and no other torch is downloaded.
A user's first run installs them into the hooks' environment from the registry instead (torch included)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ("pyproject.toml", "README.md", "torchdevice", "generated", "codegen", "catalog", "_torchdevice_startup.py",
           "torchdevice.pth", ".pre-commit-hooks.yaml")
"""What a clone of the repository holds that ``pip install .`` builds the package from (hatchling's selection)."""
TRAIN = 'import torch\n\nmodel = torch.nn.Linear(4, 2).cuda()\nx = torch.randn(8, 4, device="cuda")\nprint(model(x))\n'
KERNELS = "import cupy as cp\n\n\ndef scale(x):\n    return cp.asarray(x) * 2\n"
LOCAL = """\
repos:
  - repo: local
    hooks:
      - id: torchdevice-check
        name: torchdevice check
        entry: torchdevice check
        language: system
        types_or: [python, jupyter]
        require_serial: true
        args: [--target, mps]
"""


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false",
                    *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def pre_commit(project: Path, home: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never",
           "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with a training script that uses ``.cuda()``, a module importing CuPy, and a notebook."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    (project / "kernels.py").write_text(KERNELS)
    shutil.copy(ROOT / "examples" / "colab_train.ipynb", project / "colab.ipynb")
    git("init", "-q", cwd=project)
    git("add", "-A", cwd=project)
    return project


def hooks_repository(tmp_path: Path) -> tuple[Path, str]:
    """A git repository of the working tree's package, committed: its path and revision."""
    hooks = tmp_path / "torchdevice"
    hooks.mkdir()
    for name in PACKAGE:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, hooks / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(source, hooks / name)
    git("init", "-q", cwd=hooks)
    git("add", "-A", cwd=hooks)
    git("commit", "-q", "-m", "hooks", cwd=hooks)
    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=hooks, capture_output=True, text=True,
                              check=True).stdout.strip()
    return hooks, revision


def test_the_published_hooks_fail_on_blockers_and_on_files_to_rewrite_and_write_with_the_arg(project, tmp_path):
    hooks, revision = hooks_repository(tmp_path)
    config = project / ".pre-commit-config.yaml"
    head = f"repos:\n  - repo: {hooks}\n    rev: {revision}\n    hooks:\n"
    config.write_text(head + "      - id: torchdevice-check\n        args: [--target, mps]\n"
                             "      - id: torchdevice-rewrite\n")
    home = tmp_path / "pre-commit-home"

    done = pre_commit(project, home)
    assert done.returncode == 1, done.stdout + done.stderr
    check, rewrite = done.stdout.split("- hook id: ")[1:]
    assert check.startswith("torchdevice-check") and "kernels.py:1:1: blocker cupy" in check
    assert "checked for mps" in check and "3 files" in check  # the notebook too (types_or: jupyter)
    assert rewrite.startswith("torchdevice-rewrite")
    assert "would rewrite train.py" in rewrite and "would rewrite colab.ipynb" in rewrite
    assert (project / "train.py").read_text() == TRAIN  # check mode: nothing written
    [environment] = home.glob("repo*/py_env-*")
    installed = {p.name.split("-")[0].lower() for p in environment.glob("lib/python*/site-packages/*.dist-info")}
    assert "torchdevice_toolkit" in installed and "torch" not in installed  # this package alone, built from the clone

    config.write_text(head + "      - id: torchdevice-rewrite\n        args: [--write]\n")
    written = pre_commit(project, home)
    assert written.returncode == 1 and "files were modified by this hook" in written.stdout, written.stdout
    assert ".to(_DEVICE)" in (project / "train.py").read_text()

    (project / "kernels.py").unlink()
    git("add", "-A", cwd=project)
    config.write_text(head + "      - id: torchdevice-check\n      - id: torchdevice-rewrite\n")
    clean = pre_commit(project, home)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert clean.stdout.count("Passed") == 2


def test_a_local_hook_runs_the_command_of_the_project_s_environment(project, tmp_path):
    (project / ".pre-commit-config.yaml").write_text(LOCAL)
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = pre_commit(project, tmp_path / "pre-commit-home", path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "kernels.py:1:1: blocker cupy" in done.stdout and "3 files checked for mps" in done.stdout
    (project / "kernels.py").unlink()
    git("add", "-A", cwd=project)
    assert pre_commit(project, tmp_path / "pre-commit-home", path).returncode == 0
