"""Finding files, decoding them as Python does, replacing them safely, and keeping their bytes outside
rewritten statements. Real files, links, FIFOs and permissions; no mocks."""

from __future__ import annotations

import codecs
import os
import stat
from pathlib import Path

import pytest

from torchdevice.rewrite.jobs import Options, rewrite_files
from torchdevice.rewrite.ruleset import default
from torchdevice.rewrite.source import SourceError, rewrite_source
from torchdevice.source import files
from torchdevice.source.files import Found

CUDA = "import torch\n\nx = torch.ones(1).cuda()\ny = torch.zeros(1).cuda()\n"


def _tree(root, paths):
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("x = 1\n")


def _relative(found, root):
    return [(item.path.relative_to(root).as_posix(), item.skip) for item in found]


def _write(path: Path) -> str:
    """Rewrite one file in place as ``--write`` does; its status (and reason)."""
    [result] = rewrite_files([Found(path)], Options(mode="write"), jobs=1)
    return f"{result.status} {result.reason}".strip()


def test_discover_skips_environments_caches_and_excluded(tmp_path):
    _tree(tmp_path, [
        "pkg/a.py", "pkg/sub/b.py", "pkg/notes.txt", "pkg/.git/hooks/c.py", "pkg/__pycache__/d.py",
        "pkg/venv/e.py", "pkg/.venv/f.py", "pkg/lib/site-packages/g.py", "pkg/myenv/pyvenv.cfg", "pkg/myenv/h.py",
        "pkg/build/i.py", "pkg/sub/gen_pb2.py", "outside.py",
    ])
    found = files.discover([str(tmp_path / "pkg"), str(tmp_path / "outside.py"), str(tmp_path / "pkg/a.py")],
                           exclude=["build", "*_pb2.py"])
    assert _relative(found, tmp_path) == [("pkg/a.py", ""), ("pkg/sub/b.py", ""), ("outside.py", "")]


def test_exclude_matches_relative_paths(tmp_path):
    _tree(tmp_path, ["src/keep/a.py", "src/skip/b.py"])
    assert [f.path.name for f in files.discover([str(tmp_path / "src")], exclude=["skip/*"])] == ["a.py"]


def test_links_are_followed_only_inside_the_given_paths_and_loops_end_nothing(tmp_path):
    _tree(tmp_path, ["project/real.py", "project/pkg/mod.py", "elsewhere/secret.py", "elsewhere/lib/x.py"])
    project = tmp_path / "project"
    (project / "inside.py").symlink_to(project / "pkg" / "mod.py")  # the same file as pkg/mod.py: found once
    (project / "outside.py").symlink_to(tmp_path / "elsewhere" / "secret.py")
    (project / "lib").symlink_to(tmp_path / "elsewhere" / "lib")
    (project / "pkg" / "again").symlink_to(project)  # a directory loop
    (project / "a.py").symlink_to(project / "b.py")
    (project / "b.py").symlink_to(project / "a.py")  # a file loop
    found = _relative(files.discover([str(project)]), project)
    assert found == [
        ("a.py", "symbolic link loop"),
        ("b.py", "symbolic link loop"),
        ("inside.py", ""),
        ("lib", f"symbolic link to a directory outside the given paths ({tmp_path / 'elsewhere' / 'lib'}); "
                "not followed"),
        ("outside.py", f"symbolic link to a file outside the given paths ({tmp_path / 'elsewhere' / 'secret.py'}); "
                       "not followed"),
        ("real.py", ""),
    ]


def test_a_fifo_is_set_aside_without_being_opened_for_long(tmp_path):
    os.mkfifo(tmp_path / "pipe.py")
    assert _relative(files.discover([str(tmp_path)]), tmp_path) == [("pipe.py", "not a regular file")]
    with pytest.raises(files.Skipped, match="not a regular file"):
        files.read(tmp_path / "pipe.py")  # named explicitly: opened without blocking, then set aside


def test_too_large_files_are_set_aside_unread(tmp_path):
    path = tmp_path / "big.py"
    path.write_text(CUDA * 10)
    with pytest.raises(files.Skipped, match="over the limit of 100"):
        files.read(path, max_bytes=100)


def test_not_utf8_names_path_and_line(tmp_path):
    path = tmp_path / "latin.py"
    data = "x = 1\ny = 'café'\n".encode("latin-1")
    with pytest.raises(files.Unreadable, match=r"latin\.py:2: not UTF-8 \(byte 0xe9\)"):
        files.decode(path, data)


def test_a_coding_declaration_is_honoured_both_ways(tmp_path):
    path = tmp_path / "latin.py"
    text = "# -*- coding: latin-1 -*-\nimport torch\nname = \"café\"\nx = torch.ones(1).cuda()\n"
    path.write_bytes(text.encode("latin-1"))
    assert _write(path) == "changed"
    assert path.read_bytes() == text.replace(".cuda()", ".to(torch.accelerator.current_accelerator("
                                             'check_available=True) or torch.device("cpu"))').encode("latin-1")


def test_an_unknown_coding_is_an_error_naming_its_line(tmp_path):
    path = tmp_path / "odd.py"
    path.write_bytes(b"#!/usr/bin/env python\n# coding: klingon\nimport torch\n")
    with pytest.raises(files.Unreadable, match=r"odd\.py:2: .*klingon"):
        files.decode(path, path.read_bytes())


def test_byte_order_mark_survives_a_rewrite(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(codecs.BOM_UTF8 + CUDA.encode())
    assert _write(path) == "changed"
    assert path.read_bytes().startswith(codecs.BOM_UTF8 + b"import torch\n")
    assert b".to(_DEVICE)" in path.read_bytes()


def test_replace_keeps_mode_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(CUDA)
    path.chmod(0o754)
    assert _write(path) == "changed"
    assert stat.S_IMODE(path.stat().st_mode) == 0o754
    assert os.listdir(tmp_path) == ["train.py"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_replace_keeps_the_owner(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(CUDA)
    os.chown(path, 1234, 5678)
    assert _write(path) == "changed"
    assert (path.stat().st_uid, path.stat().st_gid) == (1234, 5678)


def test_replace_writes_through_a_link_inside_the_tree(tmp_path):
    real = tmp_path / "real.py"
    real.write_text(CUDA)
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert _write(link) == "changed"
    assert link.is_symlink() and ".to(_DEVICE)" in real.read_text()


def test_a_file_changed_since_it_was_read_is_not_replaced(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(CUDA)
    data, snapshot = files.read(path)
    path.write_text(CUDA + "# edited meanwhile\n")
    with pytest.raises(files.Refused, match="changed since it was read"):
        files.replace(path, snapshot, b"rewritten\n")
    assert path.read_text() == CUDA + "# edited meanwhile\n"
    assert os.listdir(tmp_path) == ["train.py"]


def test_same_size_edits_within_the_clock_tick_are_seen(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(CUDA)
    data, snapshot = files.read(path)
    path.write_text(CUDA.replace("ones", "rand"))
    os.utime(path, ns=(snapshot.mtime_ns, snapshot.mtime_ns))  # same size, same time: only the content differs
    with pytest.raises(files.Refused, match="changed since it was read"):
        files.replace(path, snapshot, b"rewritten\n")


def test_hard_links_and_read_only_files_are_refused_and_left_whole(tmp_path):
    linked = tmp_path / "linked.py"
    linked.write_text(CUDA)
    os.link(linked, tmp_path / "other-name.py")
    assert _write(linked) == f"failed {linked}: not written: it has 2 hard links, which replacing it would separate"
    assert (tmp_path / "other-name.py").read_text() == CUDA == linked.read_text()
    frozen = tmp_path / "frozen.py"
    frozen.write_text(CUDA)
    frozen.chmod(0o444)
    assert _write(frozen) == f"failed {frozen}: not written: it is read-only"
    assert frozen.read_text() == CUDA


def test_windows_line_endings_are_kept_everywhere():
    source = "import torch\r\n\r\ndef f(x):\r\n    torch.cuda.synchronize()\r\n    return x.cuda(), x.cuda()\r\n"
    code = rewrite_source(source, default()).code
    assert "torch.accelerator.synchronize()" in code and "_DEVICE = " in code
    assert code.count("\n") == code.count("\r\n")


def test_text_outside_rewritten_statements_is_kept_byte_for_byte():
    head = "import torch  # noqa\n"
    tail = "\n\n# comment \t with trailing spaces   \nx   =   torch.ones(1)   # odd spacing\nz = [1,\n     2]\n"
    code = rewrite_source(head + "y = torch.ones(1).cuda()\nw = torch.ones(2).cuda()" + tail, default()).code
    helper = '\n_DEVICE = torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")\n'
    assert code == head + helper + "y = torch.ones(1).to(_DEVICE)\nw = torch.ones(2).to(_DEVICE)" + tail


def test_syntax_error_names_the_line():
    with pytest.raises(SourceError) as info:
        rewrite_source("import torch\n\nx = torch.cuda.synchronize(\n", default())
    assert (info.value.line, str(info.value)) == (3, "'(' was never closed")


def test_files_without_cuda_are_not_parsed(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text("this is not python but mentions nothing to rewrite (\n")
    [result] = rewrite_files([Found(path)], Options(), jobs=1)
    assert result.status == "clean"
