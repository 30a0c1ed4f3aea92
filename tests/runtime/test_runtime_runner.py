"""``torchdevice run`` runs a program as ``python`` would, with the runtime active."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PROGRAM = """\
import json, sys, torch
print(json.dumps({"argv": sys.argv, "name": __name__, "file": __file__, "path0": sys.path[0],
                  "device": str(torch.zeros(1, device="cuda").device), "cuda": torch.cuda.is_available()}))
sys.exit(int(sys.argv[-1]) if sys.argv[-1].isdigit() else 0)
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tool.py").write_text(PROGRAM)
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    return path


def test_script_sees_what_python_gives_it(command, program):
    done = command("torchdevice", "run", "prog.py", "--steps", "2", "3", cwd=program.parent)
    assert done.returncode == 3, done.stderr
    assert done.stderr == ""  # silent by default
    seen = json.loads(done.stdout)
    assert seen == {"argv": ["prog.py", "--steps", "2", "3"], "name": "__main__", "file": str(program),
                    "path0": str(program.parent), "device": "cpu", "cuda": True}


def test_module_mode_and_python_dash_m(python, program):
    done = python("-m", "torchdevice", "run", "-m", "pkg.tool", "--flag", "-x", cwd=program.parent)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["argv"] == [str(program.parent / "pkg" / "tool.py"), "--flag", "-x"]
    assert (seen["name"], seen["path0"], seen["device"]) == ("__main__", str(program.parent), "cpu")


def test_traceback_is_the_programs_own(command, python, tmp_path):
    (tmp_path / "fail.py").write_text("import torch\n\ndef inner():\n    raise ValueError('boom')\n\ninner()\n")
    runtime = command("torchdevice", "run", "fail.py", cwd=tmp_path)
    native = python("fail.py", cwd=tmp_path)
    assert runtime.returncode == native.returncode == 1
    assert runtime.stderr == native.stderr
    assert runtime.stderr.count('File "') == 2  # <module> and inner(), nothing else


def test_log_info_reports_each_redirection_once(command, tmp_path):
    (tmp_path / "loop.py").write_text("import torch\nfor _ in range(3):\n    torch.zeros(1, device='cuda')\n")
    done = command("torchdevice", "run", "loop.py", cwd=tmp_path, env={"TORCHDEVICE_LOG": "info"})
    assert done.returncode == 0
    assert done.stderr.count("redirect torch.zeros: cuda->cpu") == 1
    assert "installed: cuda -> cpu" in done.stderr


def test_missing_program(command, tmp_path):
    done = command("torchdevice", "run", "absent.py", cwd=tmp_path)
    assert done.returncode == 2 and "can't open file" in done.stderr
    done = command("torchdevice", "run", "-m", "absent_module", cwd=tmp_path)
    assert done.returncode == 1 and "No module named absent_module" in done.stderr
