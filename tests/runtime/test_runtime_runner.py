"""``torchdevice run`` runs a program as ``python`` would, with the runtime active."""

from __future__ import annotations

import json
import signal
import sys
import zipfile
from pathlib import Path

import pytest

from torchdevice.fallback.cache import FORMAT, versions

pytestmark = pytest.mark.processes

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


@pytest.mark.parametrize("kind", ["directory", "zip"])
def test_a_directory_or_zip_file_with_main_runs_as_python_runs_it(command, python, tmp_path, kind):
    app = tmp_path / "app"
    app.mkdir()
    (app / "__main__.py").write_text(  # torch only where the runtime imported it: python's run stays quick
        "import json, sys\n"
        "torch = sys.modules.get('torch')\n"
        "cuda = bool(torch and torch.cuda.is_available())\n"
        "print(json.dumps({'argv': sys.argv, 'name': __name__, 'file': __file__, 'spec': __spec__.name,\n"
        "                  'package': __package__, 'path0': sys.path[0], 'cuda': cuda}))\n"
        "sys.exit(int(sys.argv[-1]))\n")
    if kind == "zip":
        with zipfile.ZipFile(tmp_path / "app.pyz", "w") as archive:
            archive.write(app / "__main__.py", "__main__.py")
        app = tmp_path / "app.pyz"
    runtime = command("torchdevice", "run", app.name, "-v", "4", cwd=tmp_path)
    native = python(app.name, "-v", "4", cwd=tmp_path)
    assert runtime.returncode == native.returncode == 4, runtime.stderr
    assert json.loads(runtime.stdout) == {**json.loads(native.stdout), "cuda": True}


def test_a_directory_without_main(command, tmp_path):
    (tmp_path / "empty").mkdir()
    done = command("torchdevice", "run", "empty", cwd=tmp_path)
    assert done.returncode == 1 and f"can't find '__main__' module in {str(tmp_path / 'empty')!r}" in done.stderr


INTERRUPTED = """\
import atexit, os, signal

atexit.register(print, "cleaned up", flush=True)

def train():
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C

train()
"""


@pytest.mark.skipif(sys.platform == "win32", reason="a process killed by a signal is a POSIX notion")
def test_ctrl_c_ends_the_run_as_it_ends_python(command, python, tmp_path):
    (tmp_path / "train.py").write_text(INTERRUPTED)
    runtime = command("torchdevice", "run", "train.py", cwd=tmp_path)
    native = python("train.py", cwd=tmp_path)
    assert runtime.returncode == native.returncode == -signal.SIGINT  # killed by SIGINT: 130 in a shell
    assert (runtime.stdout, runtime.stderr) == (native.stdout, native.stderr)  # the program's own traceback
    assert runtime.stderr.endswith("KeyboardInterrupt\n") and runtime.stdout == "cleaned up\n"
    console_script = Path(sys.executable).with_name("torchdevice")
    in_shell = command("bash", "-c", f"'{console_script}' run train.py; echo status $?", cwd=tmp_path)
    assert in_shell.stdout.split() == ["cleaned", "up", "status", "130"]


def test_devices_option(command, tmp_path):
    (tmp_path / "count.py").write_text("import torch\nprint(torch.cuda.device_count())\n")
    assert command("torchdevice", "run", "--devices", "4", "count.py", cwd=tmp_path).stdout == "4\n"
    for bad in ("0", "two"):
        done = command("torchdevice", "run", "--devices", bad, "count.py", cwd=tmp_path)
        assert done.returncode == 2 and "argument --devices: expected a positive whole number" in done.stderr
    warned = command("torchdevice", "run", "count.py", cwd=tmp_path, env={"TORCHDEVICE_DEVICES": "two"})
    assert warned.returncode == 0 and warned.stdout == "1\n"  # a bad setting is warned about, never fatal
    assert warned.stderr == ("torchdevice run: UserWarning: TORCHDEVICE_DEVICES='two' is not a positive whole "
                             "number; emulating 1 CUDA device\n")  # said plainly: no torchdevice file and line


@pytest.mark.parametrize(("value", "message"), [
    ("tpu", "unknown target 'tpu' (TORCHDEVICE_TARGET=tpu); expected one of cpu, mps, mps-sim, cuda-sim, cuda"),
    ("mps", "target 'mps' requested (TORCHDEVICE_TARGET=mps) but MPS is not available on this machine"),
])
def test_a_bad_target_setting_is_one_line_naming_the_variable(command, tmp_path, value, message):
    (tmp_path / "count.py").write_text("print('ran')\n")
    done = command("torchdevice", "run", "count.py", cwd=tmp_path, env={"TORCHDEVICE_TARGET": value})
    assert (done.returncode, done.stdout, done.stderr) == (2, "", f"torchdevice run: {message}\n")
    doctor = command("torchdevice", "doctor", cwd=tmp_path, env={"TORCHDEVICE_TARGET": value})
    assert doctor.returncode == 1 and f"target: error: {message}\n" in doctor.stdout
    assert "devices:" in doctor.stdout and not doctor.stderr  # the rest of the report is still there


VALID_CACHE = json.dumps({"format": FORMAT, **versions(), "targets": {"cpu": {}}}).encode()


@pytest.mark.parametrize("content", [b"\x80\xff garbage", VALID_CACHE[:20], b"[" * 200_000],
                         ids=["garbage", "truncated", "nested"])
def test_a_corrupt_capability_cache_is_rebuilt_and_the_run_goes_on(command, program, tmp_path, content):
    cache = tmp_path / "cache"
    cache.mkdir()
    path = cache / f"capabilities-torch-{versions()['torch']}-torchdevice-{versions()['torchdevice']}.json"
    path.write_bytes(content)
    done = command("torchdevice", "run", str(program), cwd=tmp_path, env={"TORCHDEVICE_CACHE_DIR": str(cache)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["device"] == "cpu"
    assert done.stderr.count("ignoring capability cache") == 1
    assert json.loads(path.read_text())["format"] == FORMAT  # rebuilt
