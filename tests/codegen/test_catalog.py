"""The catalog loader: the real catalog loads; every kind of bad data fails naming file, line and entry."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch_lists
from catalog_release import INSTALLED, installed_scanned, known_here
from torchdevice_generated import TORCH_VERSION

from codegen.load import FACTS, load
from codegen.plan import PlanError, plan
from codegen.schema import CatalogError
from codegen.signatures import P, parse, render

ROOT = Path(__file__).resolve().parents[2]

SCANNED = """\
torch_version: 2.13.0
group: torch
entries:
- name: torch.zeros
  kind: builtin
  module: torch
  signatures:
  - "(*size: int, out: Tensor | None = None, device: Device = None) -> Tensor"
  device_params: [device]
  aten: [zeros]
  kernels: {cpu: native, cuda: native, mps: native}
- name: torch.add
  kind: builtin
  module: torch
  signatures: []
  device_params: []
  aten: [add]
  kernels: {cpu: native, cuda: native, mps: native}
- name: torch.cuda.synchronize
  kind: function
  module: torch.cuda
  signatures: []
  device_params: []
  aten: []
  kernels: {cpu: none, cuda: none, mps: none}
- name: torch.ops.aten.add.Tensor
  kind: op_overload
  module: torch
  signatures:
  - "(self: Tensor, other: Tensor, *, alpha: number = 1) -> Tensor"
  device_params: []
  aten: [add.Tensor]
  kernels: {cpu: native, cuda: native, mps: native}
- name: torch.nn.Linear
  kind: class
  module: torch.nn
  signatures:
  - "(in_features: int, out_features: int, bias: bool = True, device=None, dtype=None)"
  device_params: [device]
  aten: []
  kernels: {cpu: none, cuda: none, mps: none}
"""
CUDA = "torch.cuda.synchronize: {does: synchronize}\n"


@pytest.fixture(scope="module")
def catalog():
    return load()


def make_catalog(tmp_path: Path, scanned: str = SCANNED, status: str | None = None, **overlays: str) -> Path:
    (tmp_path / "scanned").mkdir()
    (tmp_path / "scanned" / "torch.yaml").write_text(scanned)
    (tmp_path / "overlays").mkdir()
    overlays.setdefault("cuda", CUDA)
    for stem, text in overlays.items():
        (tmp_path / "overlays" / f"{stem}.yaml").write_text(textwrap.dedent(text))
    if status is not None:
        (tmp_path / "status.yaml").write_text(status)
    return tmp_path


def load_error(tmp_path: Path, **files: str) -> str:
    with pytest.raises(CatalogError) as info:
        load(make_catalog(tmp_path, **files))
    return str(info.value)


@known_here
def test_real_catalog_loads_and_plans(catalog):
    """The installed release's view (the catalog's own, or another known release's) has every name of this torch."""
    if INSTALLED != TORCH_VERSION:
        catalog = load(release=INSTALLED)
    with installed_scanned() as folder:
        scanned = sum(p.read_text().count("\n- name: ") for p in folder.glob("*.yaml")
                      if p.stem not in FACTS)  # autocast policy, sparse kernels: facts about overloads, not entries
    assert len(catalog.entries) == scanned  # every scanned record, counted in the text
    assert torch_lists.aten_overloads() | torch_lists.public_names() <= {e.name for e in catalog.entries}
    assert len({e.name for e in catalog.entries}) == len(catalog.entries)
    planned = plan(catalog)
    assert set(planned.policies.by_name) == {e.name for e in catalog.entries}
    assert {p.name for p in planned.policies.by_name.values()} >= {"wrap", "hand", "flows", "emulate", "passthrough"}


def test_small_catalog_applies_overlays(tmp_path):
    catalog = load(make_catalog(tmp_path, devices="torch.nn.*: {policy: flows, why: calls the factories}\n",
                                status="torch.add: {mlx: pass, cpu: fail}\n"))
    assert catalog["torch.cuda.synchronize"].cuda.does == "synchronize"
    assert catalog["torch.add"].status.cpu == "fail"
    assert [p.name for p in catalog["torch.zeros"].signatures[0].params] == ["size", "out", "device"]
    policies = plan(catalog).policies
    assert policies["torch.nn.Linear"].name == "flows" and policies["torch.zeros"].name == "wrap"
    assert policies["torch.cuda.synchronize"].name == "emulate"


def test_packages_overlay_reaches_the_check_table(tmp_path):
    catalog = load(make_catalog(tmp_path, packages="cupy: {policy: blocker, why: CUDA memory, instead: numpy}\n"
                                                   "flash_attn: {policy: standin, why: SDPA}\n",
                                devices="torch.nn.*: {policy: flows, why: calls the factories}\n"))
    table = plan(catalog).check
    assert table.packages == (("cupy", "blocker", "CUDA memory", "numpy"), ("flash_attn", "standin", "SDPA", ""))


def test_packages_told_the_truth_reach_the_runtime_and_the_check_tables(tmp_path):
    catalog = load(make_catalog(tmp_path, packages="bnb: {policy: truth, probes: [torch.cuda.synchronize], "
                                                   "why: CUDA kernels, gets: its CPU backend}\n",
                                devices="torch.nn.*: {policy: flows, why: calls the factories}\n"))
    table = plan(catalog).check
    assert table.packages == (("bnb", "truth", "CUDA kernels", "its CPU backend"),)
    assert table.told == (("bnb", ("torch.cuda.synchronize",)),)


def test_torch_modules_answered_as_the_program_reach_the_runtime_and_not_the_check(tmp_path):
    catalog = load(make_catalog(tmp_path, packages="torch.random: {policy: program, why: forks the generators}\n"
                                                   "cupy: {policy: blocker, why: CUDA memory, instead: numpy}\n",
                                devices="torch.nn.*: {policy: flows, why: calls the factories}\n"))
    table = plan(catalog).check
    assert table.as_program == ("torch.random",)
    assert [name for name, *_ in table.packages] == ["cupy"]


def test_same_as_gives_an_entry_the_named_entrys_record(tmp_path):
    catalog = load(make_catalog(tmp_path, cuda=CUDA + "torch.add: {same_as: torch.cuda.synchronize, sample: '0'}\n"))
    own, named = catalog["torch.add"].cuda, catalog["torch.cuda.synchronize"].cuda
    assert (own.policy, own.does, own.value, own.sample) == (named.policy, named.does, named.value, "0")


def test_a_python_device_entry_without_a_policy_is_an_error(tmp_path):
    with pytest.raises(PlanError, match=r"torch\.nn\.Linear: device parameters device but no policy"):
        plan(load(make_catalog(tmp_path)))


def test_a_cuda_entry_without_a_record_is_an_error(tmp_path):
    with pytest.raises(PlanError, match=r"torch\.cuda\.synchronize: no record in catalog/overlays/cuda\.yaml"):
        plan(load(make_catalog(tmp_path, cuda="")))


@pytest.mark.parametrize(("files", "where", "says"), [
    # hand-edited overlays
    ({"cuda": "torch.cuda.synchronize: {does: synchronise}\n"}, "cuda.yaml:1", "not an emulation word"),
    ({"cuda": "torch.cuda.synchronize: {policy: unsupported}\n"}, "cuda.yaml:1", "needs why"),
    ({"cuda": "torch.cuda.synchronize: [synchronize]\n"}, "cuda.yaml:1", "expected a mapping for CudaRule"),
    ({"cuda": "- torch.cuda.synchronize\n"}, "cuda.yaml:1", "expected a mapping from torch names"),
    ({"cuda": CUDA + "torch.cuda.nothing: {does: noop}\n"}, "cuda.yaml:2", "unknown torch name"),
    ({"cuda": CUDA + "torch.cuda.synchronize: {does: noop}\n"}, "cuda.yaml:2", "duplicate entry (first at line 1)"),
    ({"cuda": CUDA + "torch.add: {same_as: torch.zeros}\n"}, "cuda.yaml:2 (entry torch.add)",
     "has no record of its own"),
    ({"cuda": CUDA + "torch.add: {same_as: torch.cuda.synchronize, does: noop}\n"}, "cuda.yaml:2",
     "same_as takes no policy, does, value or why"),
    ({"devices": "torch.zeros: {policy: teleport, why: x}\n"}, "devices.yaml:1", "expected one of"),
    ({"devices": "torch.zeros: {policy: hand, by: magic, why: x}\n"}, "devices.yaml:1", "not a hand-written"),
    ({"devices": "torch.zeros: {policy: wrap}\n"}, "devices.yaml:1", "policy wrap needs why"),
    ({"devices": "torch.nothing.*: {policy: flows, why: x}\n"}, "devices.yaml:1", "matches no torch name"),
    ({"devices": "torch.zeros: {sample: [1]}\n"}, "devices.yaml:1", "field 'sample': expected str"),
    ({"devices": "torch.zeros: {policy: flows, why: a, b}\n"}, "devices.yaml:1", "unknown field 'b'"),
    ({"rewrite": "- {name: r, kind: teleport, doc: d, match: x}\n"}, "rewrite.yaml:1", "expected one of"),
    ({"rewrite": "- {name: r, code: TD101, kind: device, doc: d, match: cuda, cpu: cpu, names: '(unclosed'}\n"},
     "rewrite.yaml:1 (entry r)", "names"),
    ({"rewrite": "- {name: r, code: TD101, kind: method, doc: d, match: cuda, to: to}\n"
                 "- {name: s, code: TD101, kind: method, doc: d, match: cpu, to: to}\n"},
     "rewrite.yaml:2 (entry s)", "code TD101 is also rule 'r'"),
    ({"rewrite": "name: r\n"}, "rewrite.yaml:1", "expected a list of records"),
    ({"mlx": "add:\n  mlx: [mlx.core.add]\n"}, "mlx.yaml:2", "field 'mlx': expected str"),
    ({"mlx": "add:\n  mlx: [unclosed\n"}, "mlx.yaml:", "invalid YAML"),
    ({"mlx": "torch.add: {mlx: mlx.core.add}\n"}, "mlx.yaml:1", "unknown aten op"),
    ({"mlx": "add: {mlx: mlx.core.add, dtypes: [float64]}\n"}, "mlx.yaml:1", "expected one of"),
    ({"packages": "cupy: {policy: blocker, why: CUDA memory}\n"}, "packages.yaml:1", "needs instead"),
    ({"packages": "cupy: {policy: maybe, why: x}\n"}, "packages.yaml:1", "expected one of"),
    ({"packages": "torch.random: {policy: program, why: x, instead: y}\n"}, "packages.yaml:1", "not instead"),
    ({"packages": "cupy-cuda12x: {policy: standin, why: x}\n"}, "packages.yaml:1", "not a module name"),
    ({"packages": "bnb: {policy: truth, why: x, gets: y}\n"}, "packages.yaml:1 (entry bnb)", "needs probes"),
    ({"packages": "bnb: {policy: truth, why: x, probes: [torch.cuda.nothing], gets: y}\n"},
     "packages.yaml:1 (entry bnb)", "probe 'torch.cuda.nothing': unknown torch name"),
    ({"packages": "cupy: {policy: standin, why: x, gets: y}\n"}, "packages.yaml:1", "for policy truth, not standin"),
    ({"packages": "triton: {policy: interpreted, why: x, instead: y, cost: z}\n"}, "packages.yaml:1", "needs runs_on"),
    ({"packages": "triton: {policy: interpreted, why: x, instead: y, cost: z, runs_on: [cuda]}\n"},
     "packages.yaml:1", "runs_on: cuda not a target"),
    ({"packages": "cupy: {policy: blocker, why: x, instead: y, cost: z}\n"}, "packages.yaml:1",
     "for policy interpreted, not blocker"),
    # measured status
    ({"status": "torch.add: {cpu: maybe}\n"}, "status.yaml:1", "'maybe'"),
    ({"status": "torch.add: {speed: pass}\n"}, "status.yaml:1", "'speed'"),
    ({"status": "torch.add: [pass]\n"}, "status.yaml:1", "expected a mapping"),
    # scanned
    ({"scanned": SCANNED.replace("  signatures: []\n  device_params: []\n  aten: [add]",
                                 "  signatures: not-a-list\n  device_params: []\n  aten: [add]")},
     "torch.yaml:15", "(entry torch.add): signatures: expected a list of strings"),
    ({"scanned": SCANNED.replace('"(*size: int, out', '"(*size: int out')}, "torch.yaml:8", "not a signature"),
    ({"scanned": SCANNED.replace("mps: native}\n- name: torch.add", "mps: maybe}\n- name: torch.add")},
     "torch.yaml:11", "kernels.mps: 'maybe'"),
    ({"scanned": SCANNED.replace("  kind: function\n", "  kind: gadget\n")}, "torch.yaml:20", "kind: 'gadget'"),
    ({"scanned": SCANNED.replace("  aten: [zeros]\n", "")}, "torch.yaml:4", "missing: ['aten']"),
    ({"scanned": SCANNED.replace("  kernels: {cpu: native, cuda: native, mps: native}\n- name: torch.add",
                                 "  kernels: [native]\n- name: torch.add")}, "torch.yaml:11", "kernels: expected"),
])
def test_bad_data_is_reported_with_file_line_and_entry(tmp_path, files, where, says):
    msg = load_error(tmp_path, **files)
    assert where in msg and says in msg, msg


def test_signatures_parse_and_render_through_one_definition():
    text = "(a, /, b: int = 1, *args, c: str = 'x', **kw) -> None"
    signature = parse(text)
    assert [(p.name, p.kind, p.default) for p in signature.params] == [
        ("a", P.POSITIONAL_ONLY, None), ("b", P.POSITIONAL_OR_KEYWORD, "1"), ("args", P.VAR_POSITIONAL, None),
        ("c", P.KEYWORD_ONLY, "'x'"), ("kw", P.VAR_KEYWORD, None),
    ]
    assert render(signature) == str(signature) == text
    with pytest.raises(ValueError, match="not a signature"):
        parse("(a b)")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "torchdevice", "catalog", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.processes
def test_stats_json_matches_the_plan(catalog):
    result = run_cli("stats", "--json")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    policies = plan(catalog).policies.by_name
    assert stats["entries"] == len(catalog.entries)
    planned = plan(catalog)
    assert stats["mlx_records"] == len(planned.shims)
    assert stats["mlx_overloads"] == sum(len(s.overloads) for s in planned.shims)
    assert stats["mlx_routed_overloads"] == len(planned.fallback.mlx_routes)
    assert stats["mlx_routed_ops"] == len({name.partition("::")[2].partition(".")[0]
                                           for name, _ in planned.fallback.mlx_routes})
    assert stats["by_policy"]["wrap"] == sum(p.name == "wrap" for p in policies.values())
    for backend in ("cpu", "cuda", "mps"):
        assert sum(stats["kernels"][backend].values()) == stats["entries"]


@pytest.mark.processes
def test_show_prints_the_policy_and_why(catalog):
    shown = run_cli("show", "torch.nn.DataParallel")
    assert shown.returncode == 0, shown.stderr
    policy = plan(catalog).policies["torch.nn.DataParallel"]
    assert f"policy         {policy.name}" in shown.stdout and policy.why in shown.stdout
    missing = run_cli("show", "torch.no_such_thing")
    assert missing.returncode == 1 and "no catalog entry 'torch.no_such_thing'" in missing.stderr


CARD = "name: Tesla T4, capability: [7, 5], memory_mib: 15095, multiprocessors: 40, seen: a log, source: a URL"


def test_the_cards_reach_the_generated_table_default_first(tmp_path):
    catalog = load(make_catalog(tmp_path, gpus=f"L4: {{{CARD}}}\nT4: {{{CARD}, default: true}}\n",
                                devices="torch.nn.*: {policy: flows, why: calls the factories}\n"))
    assert [(g.key, g.memory, g.capability, g.source) for g in plan(catalog).gpus] == [
        ("T4", 15095 << 20, (7, 5), "a URL"), ("L4", 15095 << 20, (7, 5), "a URL")]


@pytest.mark.parametrize("gpus, words", [
    (f"T4: {{{CARD}}}\n", "exactly one card is the default (default: true), not none"),
    (f"T4: {{{CARD}, default: true}}\nL4: {{{CARD}, default: true}}\n", "not T4, L4"),
    ("T4: {name: Tesla T4, capability: [7, 5], memory_mib: 15095, multiprocessors: 40, seen: a log, source: ' ',"
     " default: true}\n", "gpus.yaml:1 (entry T4): seen and source: where the figures were seen"),
    (f"T4: {{{CARD}, default: true, memory: 1}}\n", "gpus.yaml:1 (entry T4): unknown field 'memory'"),
])
def test_a_bad_card_is_named(tmp_path, gpus, words):
    assert words in load_error(tmp_path, gpus=gpus)
