"""``torchdevice rewrite`` as users run it: a real subprocess, real files, exit statuses like black's."""

from __future__ import annotations

import os
import sys

import pytest

CUDA = "import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n"
PLAIN = "import torch\n\nmodel = torch.nn.Linear(2, 2)\n"


def _summary(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def test_check_reports_and_changes_nothing(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    (tmp_path / "plain.py").write_text(PLAIN)
    result = cli(tmp_path)
    assert result.returncode == 1
    assert f"would rewrite {tmp_path / 'train.py'}" in result.stderr
    assert "plain.py" not in result.stderr.replace(_summary(result.stderr), "")
    assert _summary(result.stderr).startswith("2 files scanned")
    assert "1 would be rewritten, 0 unchanged, 1 skipped (no CUDA code), 0 failed" in _summary(result.stderr)
    assert (tmp_path / "train.py").read_text() == CUDA
    assert result.stdout == ""
    assert cli("--check", tmp_path).returncode == 1


def test_diff_prints_a_unified_diff(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    result = cli("--diff", tmp_path / "train.py")
    assert result.returncode == 1
    assert result.stdout.startswith(f"--- {tmp_path / 'train.py'}\n+++ {tmp_path / 'train.py'}\n")
    assert "\n-model = torch.nn.Linear(2, 2).cuda()\n" in result.stdout
    assert "\n+model = torch.nn.Linear(2, 2).to(_DEVICE)\n" in result.stdout
    assert (tmp_path / "train.py").read_text() == CUDA


def test_write_rewrites_then_there_is_nothing_to_do(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    written = cli("--write", tmp_path)
    assert written.returncode == 0
    assert f"rewrote {tmp_path / 'train.py'}" in written.stderr
    assert ".to(_DEVICE)" in (tmp_path / "train.py").read_text()
    again = cli("--check", tmp_path)
    assert again.returncode == 0
    assert "0 would be rewritten" in _summary(again.stderr)


def test_nothing_to_do_exits_zero(tmp_path, cli):
    (tmp_path / "plain.py").write_text(PLAIN)
    result = cli(tmp_path)
    assert (result.returncode, result.stdout) == (0, "")
    assert "0 would be rewritten, 0 unchanged, 1 skipped" in _summary(result.stderr)


def test_notes_name_file_and_line_without_failing(tmp_path, cli):
    (tmp_path / "props.py").write_text("import torch\n\nname = torch.cuda.get_device_name(0)\n")
    result = cli(tmp_path)
    assert result.returncode == 0
    assert f"{tmp_path / 'props.py'}:3: torch.cuda.get_device_name has no device-agnostic equivalent" in result.stderr


def test_bad_files_are_reported_and_the_others_processed(tmp_path, cli):
    (tmp_path / "good.py").write_text(CUDA)
    (tmp_path / "syntax.py").write_text("import torch\n\nx = torch.ones(1).cuda(\n")
    (tmp_path / "latin.py").write_bytes("import torch\nx = 'café'.cuda()\n".encode("latin-1"))
    (tmp_path / "broken.py").symlink_to(tmp_path / "missing.py")
    result = cli("--write", tmp_path)
    assert result.returncode == 123
    assert ".to(_DEVICE)" in (tmp_path / "good.py").read_text()
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert f"error: {tmp_path / 'broken.py'}: no such file or directory" in errors
    assert f"error: {tmp_path / 'latin.py'}:2: not UTF-8 (byte 0xe9); skipped" in errors
    assert f"error: {tmp_path / 'syntax.py'}:3: syntax error: '(' was never closed" in errors
    assert "1 rewritten, 0 unchanged, 0 skipped (no CUDA code), 3 failed" in _summary(result.stderr)


@pytest.mark.skipif(os.geteuid() == 0, reason="file permissions do not bind root")
def test_unreadable_file_is_reported(tmp_path, cli):
    path = tmp_path / "secret.py"
    path.write_text(CUDA)
    path.chmod(0)
    result = cli(path)
    assert result.returncode == 123
    assert f"error: {path}: cannot read: Permission denied" in result.stderr


def test_missing_path_is_an_error(tmp_path, cli):
    result = cli(tmp_path / "nope.py")
    assert result.returncode == 123
    assert f"error: {tmp_path / 'nope.py'}: no such file or directory" in result.stderr


def test_parallel_and_serial_runs_agree(tmp_path, cli):
    for i in range(6):
        (tmp_path / f"m{i}.py").write_text(CUDA.replace("(2, 2)", f"({i}, 2)") + f"torch.cuda.synchronize({i})\n")
    serial, parallel = cli("--diff", "--jobs", "1", tmp_path), cli("--diff", "--jobs", "3", tmp_path)
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout and serial.stdout.count("+++ ") == 6
    assert serial.stderr.splitlines()[:-1] == parallel.stderr.splitlines()[:-1]


def test_exclude_and_environments_are_skipped(tmp_path, cli):
    (tmp_path / "train.py").write_text(CUDA)
    for folder in ("venv", "generated", "env"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mod.py").write_text(CUDA)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    result = cli("--exclude", "generated", tmp_path)
    assert _summary(result.stderr).startswith("1 file scanned")


def test_help_documents_the_exit_statuses(cli):
    result = cli("--help")
    assert result.returncode == 0
    assert "123" in result.stdout and "--write" in result.stdout


def test_jobs_must_be_positive(cli, tmp_path):
    result = cli("--jobs", "0", tmp_path)
    assert result.returncode == 2 and "must be at least 1" in result.stderr


def test_the_command_does_not_import_torch(tmp_path):
    import subprocess

    (tmp_path / "train.py").write_text(CUDA)
    code = ("import sys; from torchdevice.cli import main; code = main(['rewrite', sys.argv[1]]); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(code)")
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr


def test_progress_shows_on_a_terminal_for_long_runs_only():
    import pty
    import select

    from torchdevice.rewrite.report import Progress

    def age(progress: Progress) -> None:  # as if the run had been going for a while
        progress.start -= Progress.AFTER
        progress.last -= Progress.AFTER

    main, secondary = pty.openpty()
    with os.fdopen(secondary, "w") as terminal:
        progress = Progress(terminal)
        progress(1, 10)  # a run that just started: nothing yet
        age(progress)
        progress(5, 10)
        progress.clear()
        assert select.select([main], [], [], 10)[0], "nothing was written to the terminal"
        chunks = [os.read(main, 1000)]
        while select.select([main], [], [], 1)[0]:  # the terminal may hand the writes over in pieces
            chunks.append(os.read(main, 1000))
        shown = b"".join(chunks).decode()
    os.close(main)
    assert shown == "\rrewrite: 5/10 files parsed\r\x1b[K"
    read, write = os.pipe()
    with os.fdopen(write, "w") as pipe:
        quiet = Progress(pipe)
        age(quiet)
        quiet(5, 10)
        quiet.clear()
    with os.fdopen(read) as output:
        assert output.read() == ""
