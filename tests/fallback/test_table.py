"""The kernel table the engine starts from: decided from a catalog, rendered as importable constants."""

from __future__ import annotations

from pathlib import Path

from codegen.load import load
from codegen.plan import Plan, plan
from codegen.render import environment


def overload(name: str, signature: str, mps: str) -> str:
    return f"""\
- name: torch.ops.aten.{name}
  kind: op_overload
  module: torch
  signatures: ["{signature}"]
  device_params: []
  aten: [{name}]
  kernels: {{cpu: native, cuda: native, mps: {mps}}}
"""


def function(name: str, op: str, signature: str) -> str:
    return f"""\
- name: torch.{name}
  kind: builtin
  module: torch
  signatures: ["{signature}"]
  device_params: []
  aten: [{op}]
  kernels: {{cpu: native, cuda: native, mps: native}}
"""


SCANNED = "torch_version: 2.13.0\ngroup: torch\nentries:\n" + "".join([
    function("add", "add", "(input: Tensor, other: Tensor, *, alpha: Number = 1, out: Tensor | None = None) -> Tensor"),
    function("erfinv", "erfinv", "(input: Tensor, *, out: Tensor | None = None) -> Tensor"),
    overload("add.Scalar", "(self: Tensor, other: number, alpha: number = 1) -> Tensor", "composite"),
    overload("add.Tensor", "(self: Tensor, other: Tensor, *, alpha: number = 1) -> Tensor", "native"),
    overload("add.int", "(a: int, b: int) -> int", "none"),
    overload("add.out", "(self: Tensor, other: Tensor, *, alpha: number = 1, out: Tensor) -> Tensor", "native"),
    overload("cumsum.default", "(self: Tensor, dim: int, *, dtype: ScalarType | None = None) -> Tensor", "missing"),
    overload("cumsum.out", "(self: Tensor, dim: int, *, dtype: ScalarType | None = None, out: Tensor) -> Tensor",
             "missing"),
    overload("erfinv.default", "(self: Tensor) -> Tensor", "native"),
])
MLX = """\
add: {mlx: mlx.core.add, args: {self: 0, other: 1}}
erfinv: {mlx: mlx.core.erfinv, args: {self: 0}}
"""
STATUS = """\
torch.ops.aten.add.Scalar: {mlx: pass}
torch.ops.aten.erfinv.default: {mlx: fail}
torch.erfinv: {mps: fail}
torch.ops.aten.cumsum.out: {mps: fail}
"""


def small_plan(root: Path) -> Plan:
    (root / "scanned").mkdir(parents=True)
    (root / "overlays").mkdir()
    (root / "scanned" / "torch.yaml").write_text(SCANNED)
    (root / "overlays" / "mlx.yaml").write_text(MLX)
    (root / "status.yaml").write_text(STATUS)
    return plan(load(root))


def test_decisions(tmp_path):
    table = small_plan(tmp_path).fallback
    assert table.missing_on_mps == ("aten::cumsum", "aten::cumsum.out")
    assert table.try_on_mps == ("aten::erfinv",)  # measured failing; cumsum.out is missing anyway
    # the add record's overloads (add.int is no tensor op, none of its kernels are torch's); erfinv's
    # record measured failing, so none of its overloads is routed
    assert table.mlx_routes == (("aten::add.Scalar", "add"), ("aten::add.Tensor", "add"), ("aten::add.out", "add"))


def test_template_renders_the_decisions(tmp_path):
    planned = small_plan(tmp_path)
    text = environment().get_template("torchdevice_generated/fallback_table.py.j2").render(plan=planned, track=iter)
    namespace: dict[str, object] = {}
    exec(compile(text, "fallback_table.py", "exec"), namespace)
    table = planned.fallback
    assert namespace["MISSING_ON_MPS"] == frozenset(table.missing_on_mps)
    assert namespace["TRY_ON_MPS"] == frozenset(table.try_on_mps)
    assert namespace["MLX_ROUTES"] == dict(table.mlx_routes)


def test_generated_table_names_real_overloads():
    from torchdevice_generated import fallback_table

    from torchdevice.device.aten import overload as resolve

    names = fallback_table.MISSING_ON_MPS | fallback_table.TRY_ON_MPS | set(fallback_table.MLX_ROUTES)
    assert [n for n in sorted(names) if resolve(n) is None] == []
